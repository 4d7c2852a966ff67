"""What `snakemake --report` must hold: the verdict, the take-up plot and the cross-term table and plot, each with its caption."""

import html
import json
import re
import zipfile

from experiments.synthetic_sequences.analysis.records.curves import TAKEUP_THRESHOLD
from experiments.synthetic_sequences.metrics import margins


def report_variable(page: str, name: str):
    """A JSON object the report's page holds as `var name = {...}` (snakemake's results and categories)."""
    start = re.search(rf"var {name} = (?=\{{)", page)
    assert start, name
    return json.JSONDecoder().raw_decode(page, start.end())[0]


def text(caption_html: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", caption_html)).split())


def check_report(archive_path, results_folder):
    """The verdict, cross-term table, forest and take-up plots under Verdict in a report.zip, each with the caption that
    says how to read it; every other table and plot with its kind's (tests/test_workflow.py builds one on its pilot)."""
    with zipfile.ZipFile(archive_path) as archive:
        page = archive.read("report/report.html").decode()
        assert any(name.endswith("/verdict.md") for name in archive.namelist())
    results, categories = report_variable(page, "results"), report_variable(page, "categories")
    captions = {entry["filename"]: text(entry["caption"]) for entry in results.values()}
    assert {name for files in categories["Verdict"].values() for name in files} >= {
        str(results_folder / path) for path in ("tables/verdict.md", "tables/cross_term.csv", "plots/forest.png", "plots/takeup.png")
    }
    margin = margins()
    bands = (f"+-{margin['took_up']:g} of the runs", f"+-{margin['mutual_information']:g} nats", f"+-{margin['strategy_information']:g}")
    verdict, forest, cross_term, takeup = (captions[name] for name in ("verdict.md", "forest.png", "cross_term.csv", "takeup.png"))
    assert verdict.startswith("The verdict (verdict.md)") and all(band in verdict for band in bands)
    assert "design decision column is the one that counts" in verdict and "naive" in verdict
    assert forest.startswith("The note's question at a glance (forest.png)")
    assert "one row per (family, term, alpha) and one panel per endpoint" in forest and "95% interval" in forest
    assert "Shaded band: the equivalence margin" in forest and all(band in forest for band in bands)
    assert "the one that counts" in forest and "naive" in forest
    assert cross_term.startswith("The cross-term table (cross_term.csv)") and "design decision is the column that counts" in cross_term
    assert takeup.startswith("Take-up over training (takeup.png; on a beta axis takeup_<family>_<term>.png, one file per main")
    assert "one panel row per (family, term, alpha)" in takeup
    assert "1 - Kaplan-Meier" in takeup and f">= {TAKEUP_THRESHOLD:g} nats" in takeup and "marked |" in takeup
    assert "final test I(x;z)" in takeup and "strategy information" in takeup
    # every other table and plot has its kind's caption
    assert captions["curves.png"].startswith("A figure of the pilot") and captions["runs.csv"].startswith("A table of the pilot")
