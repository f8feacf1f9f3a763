/* C unit-test runner of the firmware: exit status 0 only if every check passed. */
#include <stdio.h>

#include "test_util.h"

int bm_test_failures;
int bm_test_checks;

void run_link_tests(void);
void run_core_tests(void);
void run_plant_tests(void);

int main(void)
{
    run_link_tests();
    run_core_tests();
    run_plant_tests();
    printf("firmware tests: %d checks, %d failures\n", bm_test_checks, bm_test_failures);
    return bm_test_failures == 0 ? 0 : 1;
}
