"""The Grafana dashboard in charts/ against the metrics the Exporter exposes.

Vocabulary: an *expr* is a panel target's PromQL; the *exposed* names are the
sample names (histogram ``_bucket``/``_sum``/``_count`` included) and label names
of an Exporter's exposition over a filled store, so a metric or label renamed
in exporter.py without the dashboard following fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from egs_hub.service.exporter import Exporter
from egs_hub.store import db

from .test_exporter import SAMPLES, fill

DASHBOARD = Path(__file__).parents[2] / "charts" / "egs-hub" / "dashboards" / "egs-hub.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# What the dashboard must show (the list), so that dropping a panel's metric fails too.
REQUIRED = {
    "egs_gpus",
    "egs_queue_length",
    "egs_gprs",
    "egs_gpr_wait_seconds_bucket",
    "egs_estimate_error_seconds_bucket",
    "egs_estimates_total",
    "egs_planner_pass_seconds_bucket",
    "egs_gpu_utilization_percent",
    "egs_gpu_temperature_celsius",
    "egs_gpu_power_watts",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
MATCHERS = re.compile(r"\{([^}]*)\}")
VARIABLE_QUERY = re.compile(r"label_values\((\w+),\s*(\w+)\)")


def metric_names(expr: str) -> set[str]:
    """Identifiers of a PromQL expr that are neither functions, keywords, labels, ranges nor Grafana variables."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = MATCHERS.sub("", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = LABEL_LISTS.sub("", expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)
    return set(re.findall(r"\b[A-Za-z_]\w*\b(?!\s*\()", expr)) - KEYWORDS


def label_names(expr: str) -> set[str]:
    """Labels an expr matches on or groups by."""
    names = {name for group in LABEL_LISTS.findall(expr) for name in re.findall(r"\w+", group)}
    for matchers in MATCHERS.findall(re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)):
        names |= set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers))
    return names


NAME_CASES = {
    "a quantile over a histogram": (
        'histogram_quantile(0.95, sum by (le) (rate(egs_x_bucket{a=~"$a", b!=""}[$__rate_interval])))',
        {"egs_x_bucket"},
        {"le", "a", "b"},
    ),
    "a ratio of two metrics": ('m_used{c="x"} / on (uuid) m_total', {"m_used", "m_total"}, {"c", "uuid"}),
    "topk of a selector": ('topk(10, egs_t{cluster=~"$cluster"})', {"egs_t"}, {"cluster"}),
}


@pytest.mark.parametrize("case", NAME_CASES.values(), ids=NAME_CASES.keys())
def test_promql_names_are_found(case):
    expr, want_metrics, want_labels = case
    assert (metric_names(expr), label_names(expr)) == (want_metrics, want_labels)


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


@pytest.fixture(scope="module")
def exposed(tmp_path_factory) -> tuple[set[str], set[str]]:
    """(sample names, label names) of an Exporter with a filled store, samples and observations."""
    engine = db.make_engine(f"sqlite:///{tmp_path_factory.mktemp('dashboard')}/egs.sqlite")
    db.upgrade(engine)
    sessions = db.make_sessions(engine)
    fill(sessions)
    exporter = Exporter(sessions, lambda: SAMPLES)
    exporter.observe_pass(0.01)
    exporter.observe_start(300, -20)
    body, _ = exporter.exposition()
    engine.dispose()
    samples = [s for family in text_string_to_metric_families(body.decode()) for s in family.samples]
    return {s.name for s in samples}, {label for s in samples for label in s.labels}


def exprs(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_has_its_schema_and_variables(dashboard):
    assert dashboard["schemaVersion"] == 39
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"datasource", "cluster", "slice"}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    for name in ("cluster", "slice"):
        assert variables[name]["datasource"] == DATASOURCE
        assert VARIABLE_QUERY.fullmatch(variables[name]["query"]).group(2) == name


def test_every_panel_has_a_unique_id_and_the_datasource_variable(dashboard):
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        assert all(target["datasource"] == DATASOURCE for target in panel["targets"]), panel["title"]


def test_every_metric_and_label_the_dashboard_uses_is_exposed(dashboard, exposed):
    exposed_names, exposed_labels = exposed
    used_names = set().union(*map(metric_names, exprs(dashboard)))
    used_labels = set().union(*map(label_names, exprs(dashboard)))
    for variable in dashboard["templating"]["list"][1:]:
        metric, label = VARIABLE_QUERY.fullmatch(variable["query"]).groups()
        used_names.add(metric)
        used_labels.add(label)
    assert used_names - exposed_names == set()
    assert used_labels - exposed_labels == set()
    assert REQUIRED - used_names == set()
