# The core tests (their shared helpers are in testkit/testkit.mk).

EXTRA_DIST += tests/lsan.supp

# The layering rule (core/LAYERS): no include points up.
TESTS += tests/check_layers.sh
EXTRA_DIST += tests/check_layers.sh core/LAYERS
