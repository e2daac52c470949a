# The Python door (docs/python.md): the package alphast, pure Python, into
# $(pythondir) when configure found a Python 3. The tests import it from
# the source tree (tests/test_python.sh, tests/test_python_place.sh).
if HAVE_PYTHON
alphast_pythondir = $(pythondir)/alphast
alphast_python_PYTHON = python/alphast/__init__.py python/alphast/run.py python/alphast/place.py
endif
EXTRA_DIST += python/README.md

TESTS += tests/test_python.sh tests/test_python_place.sh
EXTRA_DIST += tests/test_python.sh tests/python_read_run.py tests/test_python_place.sh tests/python_place.py \
	tests/data/python_tiny.yaml
