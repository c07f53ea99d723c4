"""Replicas, cost and rate limits live in the workbook (scm_xl/workbook/slo_sheet.py): the
Summary's inputs (RPM and TPM limits, the deployment's target, token or GPU prices), the SLO
sheet's per-configuration traffic, replicas and cost, and the plan's answer (limit-bound or
server-bound), against figures computed by hand, against `scm-xl solve --slo ... --json` on the
same data, verified on IronCalc and LibreOffice; a person's edit of the RPM limit in real
LibreOffice flips the answer and `verify` passes. The plan's order (minimise concurrency or cost)
is a Summary input too: by cost the workbook chooses what `solve --minimise cost` chooses, a
person's switch in LibreOffice changes the answer, and cost with no price says so, answering nothing."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scm_xl import capacity, goodput
from scm_xl.cli import main
from scm_xl.collect.records import REQUEST_COLUMNS
from scm_xl.results import ResultRow, write_results
from scm_xl.rules import DEFAULT_TARGET
from scm_xl.workbook import slo_sheet, summary_sheet
from scm_xl.workbook.fill import fill
from support import books
from support import engines
from support.engines import ENGINES
from support.paths import UNO_PYTHON

SLO_ARGS = ["--slo", "e2el=10", "--attainment", "0.5"]  # every request is good; 8 of 8 clears 0.5 (Wilson 67.6%)
TARGET = float(DEFAULT_TARGET["tps"])  # a new workbook's target TPS: 100

# Two configurations of model m at concurrency 4, 8 requests each of 100 prompt tokens, all good:
#   S (max_tokens 10): 0.8 s a request, 10 tokens, 1.6 s in all -> 50 TPS; at 100 TPS 2 replicas,
#       RPM 2 x 60 x 4 / 0.8 = 600, TPM 600 x (100 + 10) = 66,000
#   L (max_tokens 40): 2.0 s a request, 40 tokens, 4.0 s in all -> 80 TPS; at 100 TPS 2 replicas
#       (1.25 up), RPM 2 x 60 x 4 / 2 = 240, TPM 240 x (100 + 40) = 33,600
# Without limits S comes first (2 replicas each; then the shorter max_tokens): server-bound.
# RPM 300 (270 used) and TPM 60,000 (54,000 used) rule S out, not L: limit-bound, 2 x L.
CONFIGS = {"S": (10, 0.8, 1.6), "L": (40, 2.0, 4.0)}  # max_tokens (= tokens a request), latency, total time
Config = tuple[int, int, float, float]  # concurrency, max_tokens, latency, total time
AT_4: dict[str, Config] = {name: (4, *figures) for name, figures in CONFIGS.items()}
# W beside them: concurrency 8, max_tokens 10, 16 requests of 0.875 s in 1.75 s -> 160 / 1.75 = 91.4 TPS; at 100
# TPS 2 replicas, as S and L. On 4 GPUs at 2 an hour each costs 2 x 4 x 2 = 16 an hour, and per 1M output
# tokens 4 x 2 / (TPS x 3600) x 1e6: S 44.44, L 27.78, W 24.31. By concurrency S (2 replicas, the fewest
# slots, the shorter max_tokens); by cost W (the same cost per hour, the lowest per 1M): the orders differ.
WIDE: dict[str, Config] = {**AT_4, "W": (8, 10, 0.875, 1.75)}
GPU_PRICES = ["--gpu-hour-price", "2", "--gpus", "4"]


def _request(exp_id: str, concurrency: int, max_tokens: int, latency: float) -> dict[str, str]:
    row = dict.fromkeys(REQUEST_COLUMNS, "")
    row.update(exp_id=exp_id, model="m", concurrency=str(concurrency), max_tokens=str(max_tokens), repeat="1",
               slot="0",
               seq="0", warmup="false", ttft_s="0.1", latency_s=str(latency), prompt_tokens="100",
               completion_tokens=str(max_tokens), status="ok")
    return row


def _write(folder: Path, *, headers: tuple[int, int] | None = None, configs: Mapping[str, Config] = AT_4) -> Path:
    """The results CSV and the per-request CSV beside it, 2 requests a slot; `headers`: the RPM
    and TPM limits the provider's x-ratelimit-limit-* headers announced (recorded on every row)."""
    rows, requests = [], []
    for i, (concurrency, max_tokens, latency, wall) in enumerate(configs.values(), start=1):
        exp_id = f"E{i:03d}"
        sent: dict[str, Any] = {} if headers is None else {
            "ratelimit_limit_requests": headers[0], "ratelimit_limit_tokens": headers[1]}
        count = 2 * concurrency
        rows.append(ResultRow(exp_id=exp_id, model="m", concurrency=concurrency, requests_per_slot=2,
                              total_requests=count, max_tokens=max_tokens, total_time_s=wall,
                              total_output_tokens=count * max_tokens, **sent))
        requests += [_request(exp_id, concurrency, max_tokens, latency) for _ in range(count)]
    results = folder / "results.csv"
    write_results(results, rows)
    with open(goodput.requests_path_for(results), "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=REQUEST_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(requests)
    return results


def _fill_cli(results: Path, out: Path, engine: str, *options: str) -> None:
    outcome = CliRunner().invoke(main, ["fill", str(results), "-o", str(out), "--lang", "en", "--engine", engine,
                                        "-q", *SLO_ARGS, *options])
    assert outcome.exit_code == 0, outcome.output  # 0: every formula cell matched the reference


def _shown(path: Path) -> dict[str, Any]:
    """The Summary's capacity inputs and answer, as the engine computed them."""
    ws = books.sheet(path, "Summary")
    rows = {**summary_sheet.SLO_CAPACITY_INPUT_ROWS,
            **{f"out.{key}": row for key, row in summary_sheet.SLO_CAPACITY_OUTPUT_ROWS.items()}}
    return {key: ws[f"B{row}"].value for key, row in rows.items()}


def _configurations(path: Path) -> dict[int, dict[str, Any]]:
    """The SLO sheet's per-configuration table, by max_tokens."""
    ws = books.sheet(path, slo_sheet.SHEET_TITLES["en"])
    out = {}
    for row in range(slo_sheet.FIRST, ws.max_row + 1):
        if ws[f"{slo_sheet.CELL_COLS['no']}{row}"].value is not None:
            values = {key: ws[f"{col}{row}"].value for key, col in slo_sheet.CELL_COLS.items()}
            out[values["max_tokens"]] = values
    return out


def _solve(results: Path, target: float, *options: str) -> dict[str, Any]:
    outcome = CliRunner().invoke(main, ["solve", str(results), "--target-tps", f"{target:g}", *SLO_ARGS, *options,
                                        "--json"])
    assert outcome.exit_code == 0, outcome.output
    return json.loads(outcome.output)


def _same_as_solve(shown: dict[str, Any], answer: dict[str, Any]) -> None:
    plan = answer["capacity"]
    chosen = plan["chosen"]
    assert shown["out.bound"] == plan["bound"]
    assert (shown["out.replicas"], shown["out.concurrency"], shown["out.max_tokens"], shown["out.model"]) == (
        chosen["replicas"], chosen["concurrency"], chosen["max_tokens"], chosen["model"])
    for key, theirs in (("cost_million", "cost_per_million_output"), ("cost_hour", "cost_per_hour")):
        if chosen[theirs] is None:
            assert shown[f"out.{key}"] is None
        else:
            assert shown[f"out.{key}"] == pytest.approx(chosen[theirs], rel=1e-12)
    words = "; ".join(capacity.REASON_WORDS[r] for r in plan["binding"]) if plan["bound"] == capacity.LIMIT_BOUND \
        else None
    assert shown["out.binding"] == words


@pytest.mark.libreoffice
@pytest.mark.parametrize("engine", ["ironcalc", "libreoffice"])
def test_token_prices_under_rate_limits_are_limit_bound_as_by_hand(tmp_path: Path, engine: str) -> None:
    results = _write(tmp_path)
    out = tmp_path / "limited.xlsx"
    limits = ["--rpm", "300", "--tpm", "60000"]
    prices = ["--price-in", "0.5", "--price-out", "2"]
    _fill_cli(results, out, engine, *limits, *prices)
    shown = _shown(out)
    assert (shown["rpm"], shown["tpm"], shown["price_in"], shown["price_out"]) == (300, 60000, 0.5, 2)
    assert shown["target_tps"] is None and shown["gpu_hour_price"] is None and shown["gpus"] is None
    table = _configurations(out)
    s, lng = table[10], table[40]
    assert (s["replicas"], s["rpm"], s["tpm"], s["rpm_ok"], s["tpm_ok"]) == (2, pytest.approx(600),
                                                                         pytest.approx(66000), 0, 0)
    assert (lng["replicas"], lng["rpm"], lng["tpm"], lng["rpm_ok"], lng["tpm_ok"]) == (2, pytest.approx(240),
                                                                               pytest.approx(33600), 1, 1)
    # token pricing: 0.5 x 100/10 + 2 = 7 for S; 0.5 x 100/40 + 2 = 3.25 for L, per hour 100 TPS x 3600 / 1e6 x 3.25
    assert s["cost_million"] == pytest.approx(7.0) and lng["cost_million"] == pytest.approx(3.25)
    assert shown["out.bound"] == capacity.LIMIT_BOUND
    assert (shown["out.replicas"], shown["out.concurrency"], shown["out.max_tokens"]) == (2, 4, 40)
    assert shown["out.cost_million"] == pytest.approx(3.25)
    assert shown["out.cost_hour"] == pytest.approx(TARGET * 3600 / 1e6 * 3.25)  # 1.17
    assert shown["out.binding"] == (f"{capacity.REASON_WORDS[capacity.RPM_LIMIT]}; "
                                    f"{capacity.REASON_WORDS[capacity.TPM_LIMIT]}")
    _same_as_solve(shown, _solve(results, TARGET, *limits, *prices))


@pytest.mark.libreoffice
@pytest.mark.parametrize("engine", ["ironcalc", "libreoffice"])
def test_gpu_prices_with_lifted_limits_are_server_bound_as_by_hand(tmp_path: Path, engine: str) -> None:
    results = _write(tmp_path)
    out = tmp_path / "lifted.xlsx"
    limits = ["--rpm", "1000", "--tpm", "100000"]
    prices = ["--gpu-hour-price", "2", "--gpus", "4"]
    _fill_cli(results, out, engine, *limits, *prices)
    shown = _shown(out)
    assert (shown["gpu_hour_price"], shown["gpus"], shown["price_in"], shown["price_out"]) == (2, 4, None, None)
    table = _configurations(out)
    # GPU pricing: 4 GPUs x 2 / (TPS per replica x 3600) x 1e6; per hour 2 replicas x 4 GPUs x 2
    assert table[10]["cost_million"] == pytest.approx(4 * 2 / (50 * 3600) * 1e6)  # 44.44
    assert table[40]["cost_million"] == pytest.approx(4 * 2 / (80 * 3600) * 1e6)  # 27.78
    assert shown["out.bound"] == capacity.SERVER_BOUND and shown["out.binding"] is None
    assert (shown["out.replicas"], shown["out.concurrency"], shown["out.max_tokens"]) == (2, 4, 10)
    assert shown["out.cost_million"] == pytest.approx(800 / 18)
    assert shown["out.cost_hour"] == pytest.approx(16.0)
    _same_as_solve(shown, _solve(results, TARGET, *limits, *prices))


def test_the_providers_headers_are_the_default_limits(tmp_path: Path) -> None:
    """A new workbook types the limits the results CSV recorded from x-ratelimit-limit-*; solve,
    given no --rpm/--tpm, takes the same ones, and answers as the workbook does."""
    results = _write(tmp_path, headers=(300, 60000))
    out = tmp_path / "sent.xlsx"
    _fill_cli(results, out, "ironcalc")
    shown = _shown(out)
    assert (shown["rpm"], shown["tpm"]) == (300, 60000)
    assert shown["out.bound"] == capacity.LIMIT_BOUND and shown["out.max_tokens"] == 40
    assert shown["out.cost_million"] is None  # no price: no cost
    answer = _solve(results, TARGET)
    assert answer["rate_limits"]["source"] == "the provider's headers"
    _same_as_solve(shown, answer)
    # given, a limit replaces the one sent: lifted, the server binds
    _fill_cli(results, tmp_path / "given.xlsx", "ironcalc", "--rpm", "1000", "--tpm", "100000")
    assert _shown(tmp_path / "given.xlsx")["out.bound"] == capacity.SERVER_BOUND


def test_a_target_beyond_one_deployment_takes_the_fewest_replicas(tmp_path: Path) -> None:
    """At 250 TPS: S needs 5 replicas (250 / 50), L 4 (250 / 80 = 3.1 up): L is the answer;
    rebuilt from the workbook alone, the inputs and the answer stay."""
    results = _write(tmp_path)
    first = tmp_path / "wide.xlsx"
    typed = slo_sheet.capacity_inputs(target_tps=250, pricing=capacity.Pricing(gpu_hour_price=2.0, gpus=4))
    report = fill(results, output=first, engine="ironcalc", lang="en", slo=goodput.parse_slo("e2el=10", 0.5),
                  capacity=typed)
    assert report.verification.ok, [str(m) for m in report.verification.mismatches[:10]]
    table = _configurations(first)
    assert (table[10]["replicas"], table[40]["replicas"]) == (5, 4)
    shown = _shown(first)
    assert (shown["out.replicas"], shown["out.max_tokens"], shown["out.bound"]) == (4, 40, capacity.SERVER_BOUND)
    assert shown["out.cost_hour"] == pytest.approx(4 * 4 * 2.0)
    _same_as_solve(shown, _solve(results, 250, "--gpu-hour-price", "2", "--gpus", "4"))
    again = fill(None, workbook=first, output=tmp_path / "again.xlsx", engine="ironcalc")
    assert again.verification.ok
    assert again.inputs.slo_capacity == {"rpm": None, "tpm": None, "target_tps": 250, "price_in": None,
                                         "price_out": None, "gpu_hour_price": 2, "gpus": 4,
                                         "minimise": capacity.MINIMISE_CONCURRENCY}
    assert _shown(tmp_path / "again.xlsx")["out.replicas"] == 4


def test_the_inputs_stay_typeable_on_a_protected_sheet(tmp_path: Path) -> None:
    results = _write(tmp_path)
    _fill_cli(results, tmp_path / "p.xlsx", "ironcalc", "--rpm", "300")
    ws = books.worksheet(tmp_path / "p.xlsx", "Summary")
    for key in slo_sheet.CAPACITY_INPUTS:
        assert ws[slo_sheet.capacity_input(key)].protection.locked is False, key
    for key in slo_sheet.CAPACITY_OUTPUTS:
        assert ws[slo_sheet.capacity_output(key)].data_type == "f", key  # each a formula


@pytest.mark.parametrize("options, said", [
    (["--price-in", "0.5"], "--price-in and --price-out"),
    (["--price-in", "0.5", "--price-out", "2", "--gpus", "1"], "not both"),
])
def test_a_partial_or_double_price_is_refused(tmp_path: Path, options: list[str], said: str) -> None:
    results = _write(tmp_path)
    out = tmp_path / "bad.xlsx"
    outcome = CliRunner().invoke(main, ["fill", str(results), "-o", str(out), "--engine", "ironcalc", *options])
    assert outcome.exit_code == 2, outcome.output
    assert said in outcome.output and "Traceback" not in outcome.output and not out.exists()


def _edit_in_libreoffice(folder: Path, filled: Path, edited: Path, edits: list[dict[str, Any]]) -> list[Any]:
    """The Summary edited in real LibreOffice through UNO (tests/uno_edit.py), saved as `edited`;
    what uno_edit reports of each typed edit."""
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) not installed")
    if not Path(UNO_PYTHON).exists():
        pytest.fail("python3-uno is needed for the LibreOffice edit tests (apt-get install python3-uno)")
    spec, report = folder / "jobs.json", folder / "typed.json"
    spec.write_text(json.dumps([{"in": str(filled), "out": str(edited), "sheet": "Summary", "edits": edits,
                                 "report": str(report)}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    result = subprocess.run([UNO_PYTHON, str(Path(__file__).with_name("uno_edit.py")), str(spec)],
                            capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return list(json.loads(report.read_text()))


@pytest.mark.libreoffice
def test_a_person_lifts_the_rpm_limit_in_libreoffice(tmp_path: Path) -> None:
    """Filled with RPM 300 the answer is limit-bound (2 x L); typing 1000 into the Summary's RPM
    limit, as a person does, lets S through: server-bound, 2 x S; verify passes on the saved file."""
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) not installed")
    if not Path(UNO_PYTHON).exists():
        pytest.fail("python3-uno is needed for the LibreOffice edit tests (apt-get install python3-uno)")
    results = _write(tmp_path)
    filled, edited = tmp_path / "filled.xlsx", tmp_path / "edited.xlsx"
    _fill_cli(results, filled, "libreoffice", "--rpm", "300", "--price-in", "0.5", "--price-out", "2")
    before = _shown(filled)
    assert before["out.bound"] == capacity.LIMIT_BOUND and before["out.max_tokens"] == 40
    assert before["out.binding"] == capacity.REASON_WORDS[capacity.RPM_LIMIT]

    _edit_in_libreoffice(tmp_path, filled, edited, [{"set": slo_sheet.capacity_input("rpm"), "value": 1000}])

    after = _shown(edited)
    assert after["rpm"] == 1000
    assert after["out.bound"] == capacity.SERVER_BOUND and after["out.binding"] is None
    assert (after["out.replicas"], after["out.max_tokens"]) == (2, 10)
    assert after["out.cost_million"] == pytest.approx(7.0)
    _same_as_solve(after, _solve(results, TARGET, "--rpm", "1000", "--price-in", "0.5", "--price-out", "2"))
    report = engines.verified_as_saved(edited)  # LibreOffice's values as saved, and IronCalc's
    assert report.inputs.slo_capacity["rpm"] == 1000  # the reference read the person's limit


def _per_replica(shown: dict[str, Any]) -> tuple[Any, ...]:
    return shown["out.replicas"], shown["out.concurrency"], shown["out.max_tokens"]


@pytest.mark.parametrize("engine", ENGINES)
def test_minimise_cost_chooses_what_solve_chooses(tmp_path: Path, engine: str) -> None:
    """GPU pricing, WIDE: by concurrency 2 x S (concurrency 4), by cost 2 x W (concurrency 8, the
    lowest cost per 1M output tokens at the same 16 an hour), each what `solve` answers."""
    results = _write(tmp_path, configs=WIDE)
    by_concurrency, by_cost = tmp_path / "concurrency.xlsx", tmp_path / "cost.xlsx"
    _fill_cli(results, by_concurrency, engine, *GPU_PRICES)
    _fill_cli(results, by_cost, engine, *GPU_PRICES, "--minimise", "cost")
    first, cheapest = _shown(by_concurrency), _shown(by_cost)
    assert (first["minimise"], cheapest["minimise"]) == (capacity.MINIMISE_CONCURRENCY, capacity.MINIMISE_COST)
    assert _per_replica(first) == (2, 4, 10) and _per_replica(cheapest) == (2, 8, 10)
    assert first["out.cost_hour"] == cheapest["out.cost_hour"] == pytest.approx(2 * 4 * 2.0)
    assert first["out.cost_million"] == pytest.approx(4 * 2 / (50 * 3600) * 1e6)
    assert cheapest["out.cost_million"] == pytest.approx(4 * 2 / (160 / 1.75 * 3600) * 1e6)
    assert first["out.status"] is None and cheapest["out.status"] is None
    assert first["out.bound"] == cheapest["out.bound"] == capacity.SERVER_BOUND
    _same_as_solve(first, _solve(results, TARGET, *GPU_PRICES))
    _same_as_solve(cheapest, _solve(results, TARGET, *GPU_PRICES, "--minimise", "cost"))


@pytest.mark.parametrize("configs, prices, chosen", [
    # W at 80 TPS ties L: 16 an hour and 27.78 per 1M each, 2 replicas each: the table's order, L (concurrency 4)
    ({**AT_4, "W": (8, 10, 1.0, 2.0)}, GPU_PRICES, (2, 4, 40)),
    # token prices, S and W at 106.7 TPS: 7 per 1M each (100 prompt tokens per 10 output), so the same per
    # hour; the fewest replicas, W's 1 (S needs 2)
    ({"S": AT_4["S"], "W": (8, 10, 0.75, 1.5)}, ["--price-in", "0.5", "--price-out", "2"], (1, 8, 10)),
])
def test_a_cost_tie_goes_to_the_fewest_replicas_then_the_table_order(
        tmp_path: Path, configs: dict[str, Config], prices: list[str], chosen: tuple[int, int, int]) -> None:
    results = _write(tmp_path, configs=configs)
    out = tmp_path / "tie.xlsx"
    _fill_cli(results, out, "ironcalc", *prices, "--minimise", "cost")
    shown = _shown(out)
    assert _per_replica(shown) == chosen
    _same_as_solve(shown, _solve(results, TARGET, *prices, "--minimise", "cost"))


def test_by_cost_a_rate_limit_that_rules_out_the_cheapest_is_limit_bound(tmp_path: Path) -> None:
    """RPM 1000 (900 used): W's 2 x 60 x 8 / 0.875 = 1097 is over, S's 600 and L's 240 within. By
    cost the limits rule out W, the choice without them: limit-bound, 2 x L (27.78 per 1M); by
    concurrency S, within the limit, stays: server-bound."""
    results = _write(tmp_path, configs=WIDE)
    by_cost, by_concurrency = tmp_path / "cost.xlsx", tmp_path / "concurrency.xlsx"
    _fill_cli(results, by_cost, "ironcalc", *GPU_PRICES, "--rpm", "1000", "--minimise", "cost")
    _fill_cli(results, by_concurrency, "ironcalc", *GPU_PRICES, "--rpm", "1000")
    cheapest = _shown(by_cost)
    assert cheapest["out.bound"] == capacity.LIMIT_BOUND and _per_replica(cheapest) == (2, 4, 40)
    assert cheapest["out.binding"] == capacity.REASON_WORDS[capacity.RPM_LIMIT]
    assert _shown(by_concurrency)["out.bound"] == capacity.SERVER_BOUND
    _same_as_solve(cheapest, _solve(results, TARGET, *GPU_PRICES, "--rpm", "1000", "--minimise", "cost"))


def test_cost_without_a_price_says_so_and_answers_nothing(tmp_path: Path) -> None:
    """As capacity.plan refuses minimise cost with no price, the workbook's plan answers nothing
    and its note says why; by concurrency the same workbook answers. fill and solve refuse it
    outright where no workbook could hold a price."""
    results = _write(tmp_path, configs=WIDE)
    plain, costly = tmp_path / "plain.xlsx", tmp_path / "costly.xlsx"
    _fill_cli(results, plain, "ironcalc")
    assert _per_replica(_shown(plain)) == (2, 4, 10) and _shown(plain)["out.status"] is None
    outcome = CliRunner().invoke(main, ["fill", str(results), "--workbook", str(plain), "-o", str(costly),
                                        "--engine", "ironcalc", "-q", "--minimise", "cost"])
    assert outcome.exit_code == 0, outcome.output  # verified cell by cell
    shown = _shown(costly)
    assert shown["minimise"] == capacity.MINIMISE_COST
    assert shown["out.status"] == slo_sheet.TEXTS["en"]["no_price"]
    assert {key: shown[f"out.{key}"] for key in slo_sheet.CAPACITY_OUTPUTS if key != "status"} == dict.fromkeys(
        (key for key in slo_sheet.CAPACITY_OUTPUTS if key != "status"))
    ws = books.sheet(costly, slo_sheet.SHEET_TITLES["en"])
    assert ws[slo_sheet.cap_answer_cell("slot")].value is None and ws[slo_sheet.cap_answer_cell("slot_free")].value is None
    refused = CliRunner().invoke(main, ["solve", str(results), "--target-tps", f"{TARGET:g}", *SLO_ARGS,
                                        "--minimise", "cost"])
    assert refused.exit_code == 2 and "needs a price" in refused.output
    new = tmp_path / "new.xlsx"
    refused = CliRunner().invoke(main, ["fill", str(results), "-o", str(new), "--engine", "ironcalc", "-q",
                                        *SLO_ARGS, "--minimise", "cost"])
    assert refused.exit_code == 2 and "needs a price" in refused.output and "Traceback" not in refused.output
    assert not new.exists()


@pytest.mark.libreoffice
def test_a_person_chooses_by_cost_in_libreoffice(tmp_path: Path) -> None:
    """Filled by concurrency (2 x S), the Summary's "choose by" typed to cost in LibreOffice, as a
    person does on the protected sheet: 2 x W, what solve --minimise cost answers; verify passes."""
    results = _write(tmp_path, configs=WIDE)
    filled, edited = tmp_path / "filled.xlsx", tmp_path / "edited.xlsx"
    _fill_cli(results, filled, "libreoffice", *GPU_PRICES)
    assert _per_replica(_shown(filled)) == (2, 4, 10)
    address = slo_sheet.capacity_input("minimise")
    typed = _edit_in_libreoffice(tmp_path, filled, edited, [{"type": address, "text": capacity.MINIMISE_COST}])
    assert typed == [{"cell": address, "protected": True, "locked": False, "refused": False,
                      "before": capacity.MINIMISE_CONCURRENCY, "after": capacity.MINIMISE_COST}]
    after = _shown(edited)
    assert after["minimise"] == capacity.MINIMISE_COST
    assert _per_replica(after) == (2, 8, 10) and after["out.bound"] == capacity.SERVER_BOUND
    _same_as_solve(after, _solve(results, TARGET, *GPU_PRICES, "--minimise", "cost"))
    report = engines.verified_as_saved(edited)  # LibreOffice's values as saved, and IronCalc's
    assert report.inputs.slo_capacity["minimise"] == capacity.MINIMISE_COST  # the reference read the edit
