/* Minimal test harness: CHECK records a failure with file and line and carries on. */
#ifndef BM_TEST_UTIL_H
#define BM_TEST_UTIL_H

#include <stdio.h>

extern int bm_test_failures;
extern int bm_test_checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        bm_test_checks++;                                                            \
        if (!(cond)) {                                                               \
            bm_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b)                                                                  \
    do {                                                                                \
        long long va_ = (long long)(a), vb_ = (long long)(b);                           \
        bm_test_checks++;                                                               \
        if (va_ != vb_) {                                                               \
            bm_test_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", __FILE__, \
                    __LINE__, #a, va_, #b, vb_);                                        \
        }                                                                               \
    } while (0)

#endif /* BM_TEST_UTIL_H */
