"""The run kernel without Spark: flows as steps with one signature, the dispatcher's order,
and the generic written/verified artifacts each flow names its own files for."""

import json

import pytest

from layout_core.flows.changes.apply import CHANGES, VerifiedChanges, WrittenChanges
from layout_core.flows.names import CHANGES_STEPS, NIGHTLY_STEPS, REORG_STEPS
from layout_core.flows.nightly.steps import NIGHTLY
from layout_core.flows.reorg.partial import REORG, WrittenReorg
from layout_core.runs.artifacts import ArtifactError, WrittenBlocks, read_artifact, write_artifact
from layout_core.runs.flow import Flow, RunContext, Step, run_steps
from layout_core.runs.paths import RunPaths, record_metrics


def test_each_flow_runs_the_steps_the_dags_and_pages_read():
    assert NIGHTLY.names == NIGHTLY_STEPS == ("ingest", "featurize", "reduce", "optimize", "write_blocks",
                                              "verify", "update_catalog")
    assert CHANGES.names == CHANGES_STEPS == ("stage_changes", "write_changes", "verify_changes",
                                              "activate_changes")
    assert REORG.names == REORG_STEPS == ("plan_reorg", "write_reorg", "verify_reorg", "activate_reorg")
    assert [s.name for s in NIGHTLY.steps if not s.needs_spark] == ["optimize"]


def test_a_flow_that_disagrees_with_its_declared_steps_cannot_be_made():
    with pytest.raises(ImportError, match=r"steps \('a', 'c'\) differ from flows.names \('a', 'b'\)"):
        Flow("f", (Step("a", dict), Step("c", dict)), declared=("a", "b"))
    with pytest.raises(KeyError, match="flow f has no step 'x'; its steps: a"):
        Flow("f", (Step("a", dict),), declared=("a",)).step("x")


def test_run_steps_runs_in_order_up_to_until_and_returns_the_recorded_metrics(tmp_path):
    done = []

    def step(name):
        def run(context):
            done.append((name, context.input("n"), context.input("missing", "default")))
            return record_metrics(context.paths, name, {"n": len(done)})
        return Step(name, run)

    flow = Flow("f", (step("one"), step("two"), step("three")), declared=("one", "two", "three"))
    paths = RunPaths(tmp_path, "t", "", "run:1+2")
    context = RunContext(None, None, None, paths, {"n": 7})
    assert run_steps(flow, context, until="two") == {"one": {"n": 1}, "two": {"n": 2}}
    assert done == [("one", 7, "default"), ("two", 7, "default")]
    assert paths.staging == tmp_path / "_runs" / "t" / "_all" / "run_1_2"


def test_written_blocks_of_each_flow_keep_their_own_file_and_refuse_another_format(tmp_path):
    written = WrittenChanges(5, 100, {"100": {"path": "/x", "bytes": 3, "from": 7}}, 12, "-42")
    write_artifact(tmp_path, written)
    assert (tmp_path / "changes_written.json").exists() and not (tmp_path / "written.json").exists()
    assert read_artifact(tmp_path, WrittenChanges, "verify_changes") == written
    with pytest.raises(ArtifactError, match=r"reorg_written.json \(written by write_reorg\) is missing: "
                                            r"run write_reorg before verify_reorg"):
        read_artifact(tmp_path, WrittenReorg, "verify_reorg")
    # a file of the nightly flow is not a change batch's, even with the same fields
    (tmp_path / "written.json").write_text((tmp_path / "changes_written.json").read_text())
    with pytest.raises(ArtifactError, match=r"holds a 'WrittenChanges', not a WrittenBlocks: run write_blocks again"):
        read_artifact(tmp_path, WrittenBlocks, "verify")
    # format 1 (before the expected rows were kept with the blocks): the writer runs again
    old = {"format": 1, "artifact": "WrittenChanges", "version": 5, "blocks": {}}
    (tmp_path / "changes_written.json").write_text(json.dumps(old))
    with pytest.raises(ArtifactError, match=r"format 1, this version reads 2\): run write_changes again"):
        read_artifact(tmp_path, WrittenChanges, "verify_changes")
    assert VerifiedChanges.FILE == "changes_verified.json" and VerifiedChanges.STEP == "verify_changes"
