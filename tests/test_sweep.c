#include <criterion/criterion.h>
Test(sweep, placeholder) {}
