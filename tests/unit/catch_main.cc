// The one Catch2 main shared by the unit-test binaries.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
