"""MXNet on the MPI route, run as a user runs it (``pyflyte run``): ``Horovod(framework="mxnet")`` initialises
``horovod.mxnet`` in 2 ranks, which allreduce and take one Gluon ``DistributedTrainer`` step to identical parameters,
under Gloo and mpirun. Runs where Horovod is built with MXNet (make matrix's mxnet leg); the default set-up's build
refuses the framework by name instead (tests/plugin/test_torch_mpi.py)."""

import re

import pytest

FLOWS = "tests/plugin/flows/mxnet_flows.py"


@pytest.mark.smoke
@pytest.mark.needs_framework("mxnet")
@pytest.mark.parametrize("workflow, tag", [("mxnet_gloo_wf", "gloo"), ("mxnet_mpi_wf", "mpi")])
def test_two_mxnet_ranks_allreduce_and_take_a_distributed_trainer_step(pyflyte_run, workflow, tag):
    ran = pyflyte_run(FLOWS, workflow, env={"FLYTE_HOROVOD_VERBOSE": "1"})
    assert ran.returncode == 0, ran.output[-3000:]
    assert re.search(r"Result\(rank=0, checksum='[0-9a-f]{16}'\)", ran.output), ran.output[-3000:]
    lines = re.findall(rf"rank (\d)/2 \({tag}\): allreduce sum 3.0; params sha ([0-9a-f]+); identical on all ranks: "
                       r"True", ran.output)
    assert sorted(rank for rank, _ in lines) == ["0", "1"] and len({sha for _, sha in lines}) == 1, ran.output[-3000:]
