/* Declarations only: lets clang check the core for the AVR target (16-bit int) without avr-libc. */
#ifndef BM_AVR_STUB_STRING_H
#define BM_AVR_STUB_STRING_H
#include <stddef.h>
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int value, size_t n);
int memcmp(const void *a, const void *b, size_t n);
#endif
