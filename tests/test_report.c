#include <criterion/criterion.h>
Test(report, build) {}
