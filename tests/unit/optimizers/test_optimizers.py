"""The optimizer registry, typed settings, layout plans and the step artifacts, without Spark."""

from __future__ import annotations

import json

import numpy as np
import pytest

from layout_core.base.schema import TableSchema
from layout_core.flows.nightly.artifacts import CutEntry, Features
from layout_core.optimizers import (
    REGISTRY,
    CandidateCut,
    LayoutPlan,
    PlanError,
    PlanWorkload,
    VectorSample,
    get_optimizer,
    optimizer_names,
    plan_layout,
)
from layout_core.optimizers.plan import SortBlocks, TreeBlocks
from layout_core.predicates import Column, Compare
from layout_core.runs.artifacts import ArtifactError, VerifiedBlocks, read_artifact, write_artifact

T = TableSchema("t", (("id", "bigint"), ("x", "int"), ("d", "date")), ("id",))
X = Column("x", "int")


def test_the_registry_holds_the_eight_optimizers_and_refuses_unknown_names():
    assert optimizer_names() == ("fineblock", "sortkey", "qdtree", "mto", "pando", "zorder", "hilbert", "tuned")
    with pytest.raises(PlanError, match="unknown optimizer 'pandas'; registered: fineblock, sortkey, qdtree, mto"):
        get_optimizer("pandas")


def test_two_optimizers_with_one_name_fail_at_import():
    from layout_core.optimizers import build_registry
    from layout_core.optimizers.sortkey import SortKey

    class Another(SortKey):
        pass

    with pytest.raises(ImportError, match="two optimizers are registered as 'sortkey': SortKey and Another"):
        build_registry(SortKey, Another)


def test_settings_are_typed_defaulted_and_unknown_ones_refused():
    mto = get_optimizer("mto")
    settings = mto.resolve({"block_rows": "2000", "exclude_columns": "l_comment, l_shipdate"})
    assert settings == {"block_rows": 2000, "sort_column": "", "sample_rows": 150_000, "max_cuts": "auto",
                        "exclude_columns": ("l_comment", "l_shipdate"), "leaf_order": "range"}
    with pytest.raises(PlanError, match="optimizer mto has no setting num_feat .its settings: block_rows, sort_col"):
        mto.resolve({"num_feat": 3})
    with pytest.raises(PlanError, match="setting sample_rows takes an integer, not 'many'"):
        mto.resolve({"sample_rows": "many"})
    with pytest.raises(PlanError, match="block_rows must be positive"):
        mto.resolve({"block_rows": 0})
    for optimizer in REGISTRY.values():  # every setting has a one-line help
        assert all(s.help and "\n" not in s.help for s in optimizer.settings)


def _sample(keys, counts, rows=None):
    return VectorSample(tuple(keys), counts, sum(counts) if rows is None else rows)


def test_sortkey_plan_cuts_equal_blocks_of_the_sort_column():
    plan = plan_layout("sortkey", T, _sample([""], [25_000]), [], settings={"block_rows": 10_000,
                                                                        "sort_column": "d"})
    assert plan.assignment == SortBlocks(("d",), 10_000)
    assert plan.expected_block_rows == (10_000.0, 10_000.0, 5_000.0)
    with pytest.raises(PlanError, match="t has no column 'nope' to sort by"):
        plan_layout("sortkey", T, _sample([""], [10]), [], settings={"sort_column": "nope"})


def test_a_tree_plan_sized_from_a_sample_estimates_the_full_table():
    # cut 0: x < 10; 1,000 sampled rows of 4,000 (scale 4): 600 with x < 10, 400 without
    cuts = [CandidateCut(Compare(X, "<", 10))]
    workload = PlanWorkload(implies=((True,), (False,)), disjoint=((False,), (True,)), range_columns=("d",))
    plan = plan_layout("qdtree", T, _sample(["1", "0"], [600, 400], rows=4000), cuts, workload,
                       {"block_rows": 1000})
    rule = plan.assignment
    assert isinstance(rule, TreeBlocks) and rule.sort_columns == ("d",)
    assert rule.tree == (0, 1000, (0, 600), (1, 400))  # one split, leaf 0 on the x < 10 side
    # leaves of 2,400 and 1,600 estimated rows: 2 blocks and 1 block
    assert rule.leaf_n_blocks == (2, 1) and rule.leaf_first_block == (0, 2)
    assert plan.expected_block_rows == (1200.0, 1200.0, 1600.0) and plan.rows == 4000
    assert rule.leaf_of_block(1) == 0 and rule.leaf_of_block(2) == 1
    again = LayoutPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan


def test_a_leaf_holds_at_least_one_block_of_the_full_table():
    # with scale 10, a 60-row sampled side is 600 estimated rows: under one block of 1,000, no split
    cuts = [CandidateCut(Compare(X, "<", 10))]
    workload = PlanWorkload(implies=((True,),), disjoint=((False,),))
    plan = plan_layout("qdtree", T, _sample(["1", "0"], [60, 940], rows=10_000), cuts, workload,
                       {"block_rows": 1000})
    assert plan.assignment.tree == (0, 1000)


def test_plans_refuse_a_sample_they_cannot_use_and_a_changed_schema():
    with pytest.raises(PlanError, match="fineblock cannot plan on a sample"):
        plan_layout("fineblock", T, _sample([""], [10], rows=100), [])
    with pytest.raises(PlanError, match="another number of bits than the 1 cuts"):
        plan_layout("qdtree", T, _sample(["10"], [10]), [CandidateCut(Compare(X, "<", 1))])
    plan = plan_layout("sortkey", T, _sample([""], [10]), [])
    plan.check_table(T)
    wider = TableSchema("t", (*T.columns, ("y", "int")), ("id",))
    with pytest.raises(PlanError, match="the table t has changed since"):
        plan.check_table(wider)


def test_a_plan_of_another_format_or_malformed_is_refused():
    data = plan_layout("sortkey", T, _sample([""], [10]), []).to_json()
    with pytest.raises(PlanError, match="plan format 0, this version reads 1: run the optimize step again"):
        LayoutPlan.from_json({**data, "format": 0})
    with pytest.raises(PlanError, match="malformed .KeyError: 'assignment'."):
        LayoutPlan.from_json({k: v for k, v in data.items() if k != "assignment"})


def test_fineblock_weighs_features_by_their_support():
    # two features; vectors '10' and '01' of 50 rows each become two blocks of 50
    cuts = [CandidateCut(Compare(X, "<", 10), support=3), CandidateCut(Compare(X, ">", 20), support=1)]
    plan = plan_layout("fineblock", T, _sample(["01", "10"], [50, 50]), cuts, settings={"block_rows": 40})
    assert sorted(plan.expected_block_rows) == [50.0, 50.0]
    assert {key for key, *_ in plan.assignment.pieces} == {"01", "10"}
    assert np.isclose(sum(plan.expected_block_rows), 100)


def test_artifacts_round_trip_and_say_which_step_to_run_again(tmp_path):
    features = Features("mto", {"block_rows": 10}, "t", "abc", (CutEntry(0, "simple", "x < 1", "{}", 2),),
                        {"implies": []}, {"queries": 0})
    write_artifact(tmp_path, features)
    assert read_artifact(tmp_path, Features, "optimize") == features
    with pytest.raises(ArtifactError, match=r"verified.json \(written by verify\) is missing: run verify before "
                                            r"update_catalog"):
        read_artifact(tmp_path, VerifiedBlocks, "update_catalog")
    data = json.loads((tmp_path / "features.json").read_text())
    (tmp_path / "features.json").write_text(json.dumps({**data, "format": 0}))
    with pytest.raises(ArtifactError, match="is from an older version .format 0.*run featurize again"):
        read_artifact(tmp_path, Features, "optimize")
    data["cuts"][0]["position"] = "first"
    (tmp_path / "features.json").write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match=r"field cuts\[0\].position must be int, not str: run featurize again"):
        read_artifact(tmp_path, Features, "optimize")
    del data["optimizer"]
    (tmp_path / "features.json").write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match="field optimizer is missing"):
        read_artifact(tmp_path, Features, "optimize")


def test_a_new_optimizer_is_one_class_and_one_registry_line():
    """The worked example of docs/architecture.md."""
    from layout_core.optimizers import build_registry
    from layout_core.optimizers.base import BLOCK_ROWS, Optimizer
    from layout_core.optimizers.plan import even_sizes, new_plan

    class HotColumn(Optimizer):
        name = "hotcolumn"
        help = "rows sorted by the column the log filters most"
        settings = (BLOCK_ROWS,)

        def fit(self, inputs, settings):
            column = (inputs.workload.filtered_columns or inputs.table.primary_key)[0]
            rule = SortBlocks((column,), settings["block_rows"])
            return new_plan(self, inputs, settings, rule, even_sizes(inputs.vectors.rows, settings["block_rows"]))

    registry = build_registry(*(type(o) for o in REGISTRY.values()), HotColumn)
    plan = plan_layout(registry["hotcolumn"], T, _sample([""], [300]), [], PlanWorkload(filtered_columns=("x", "d")),
                       {"block_rows": 100})
    assert plan.assignment == SortBlocks(("x",), 100) and plan.n_blocks == 3
    assert LayoutPlan.from_json(plan.to_json()) == plan
