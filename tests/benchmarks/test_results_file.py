from pathlib import Path

from benchmarks.results_file import write_part


def test_a_part_written_again_replaces_only_itself(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text(
        "<!-- run:start -->\n# Results\nold figures\n<!-- run:end -->\n\n"
        "## Notes written by hand\n\nkept\n\n"
        "<!-- other:start -->\n## Another script's section\n<!-- other:end -->\n"
    )
    write_part(out, "run", "# Results\nnew figures", new_at_top=True)
    text = out.read_text()
    assert "old figures" not in text
    assert text.startswith("<!-- run:start -->\n# Results\nnew figures\n<!-- run:end -->\n\n## Notes written by hand")
    assert "kept" in text and "## Another script's section" in text
    assert text.count("<!-- run:start -->") == 1


def test_a_new_part_goes_to_the_top_or_the_end(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("## Written by hand\n")
    write_part(out, "run", "# Results", new_at_top=True)
    write_part(out, "report", "## Report")
    assert out.read_text() == (
        "<!-- run:start -->\n# Results\n<!-- run:end -->\n\n## Written by hand\n\n"
        "<!-- report:start -->\n## Report\n<!-- report:end -->\n"
    )


def test_a_missing_file_is_created(tmp_path: Path) -> None:
    out = tmp_path / "new" / "RESULTS.md"
    write_part(out, "run", "# Results\n")
    assert out.read_text() == "<!-- run:start -->\n# Results\n<!-- run:end -->\n"
