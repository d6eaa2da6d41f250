# The two commands of the README: `make run` (set up, then run the Rossmann workflow) and `make test`.
# Every target sets up first; the set-up takes seconds when nothing changed.
PYTEST_ARGS ?=

.PHONY: setup run run-mpi run-torch lint test test-fast test-multihost bench reliability matrix
setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/pyflyte run workflows/rossmann.py wf

run-mpi: setup
	.venv/bin/pyflyte run workflows/rossmann.py wf_mpi

run-torch: setup
	.venv/bin/pyflyte run workflows/rossmann.py wf_torch

# ruff with flytekit's settings (pyproject.toml [tool.ruff]); a lint error stops the tests before they start.
lint: setup
	.venv/bin/ruff check .

# Two pytest runs side by side (scripts/test.sh, docs/testing.md): the tests marked `serial` one at a time, the rest
# beside them. pytest exits 5 when it collected no test; either run's non-zero exit fails make test.
test: lint
	bash scripts/test.sh $(PYTEST_ARGS)

# The fast part alone: no slow end-to-end, fault or multi-host test.
test-fast: lint
	.venv/bin/python -m pytest -m "not slow" $(PYTEST_ARGS)

# Several hosts as Linux network namespaces on this machine (root); `make test` runs them too when it can.
test-multihost: setup
	.venv/bin/python -m pytest -m multihost $(PYTEST_ARGS)

bench: setup
	bash bench/run_all.sh

# Every fault and bad input run for real; rewrites docs/reliability.md (about 15 minutes on 2 idle cores; root).
reliability: setup
	.venv/bin/python scripts/reliability.py

# Every supported stack (docs/stack.md): each leg built into its environment (.matrix/<leg>/venv; the default leg is
# .venv), the smoke tests run there, the table written into docs/stack.md. LEGS=legacy for one leg.
LEGS ?=
matrix:
	python3 scripts/matrix.py $(LEGS)
