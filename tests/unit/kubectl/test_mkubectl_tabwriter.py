"""mkubectl's port of Go's text/tabwriter: column blocks, trailing cells, flushes, remembered widths."""

from __future__ import annotations

import io

from kubectl.tabwriter import TabWriter, tabbed


def test_cells_align_to_the_widest_plus_padding() -> None:
    assert tabbed("a\tb\naaa\tbbbb\n") == "a    b\naaa  bbbb\n"


def test_a_line_without_tabs_ends_the_column_block() -> None:
    assert tabbed("a\tb\nxx\nccc\td\n") == "a  b\nxx\nccc  d\n"


def test_the_trailing_cell_of_a_line_is_not_part_of_a_column() -> None:
    # the second line's "bb" ends its line: only the first line has a cell in column 1
    assert tabbed("a\tb\tc\naa\tbb\n") == "a   b  c\naa  bb\n"


def test_empty_cells_are_padded_and_trailing_spaces_kept() -> None:
    # describe's `Container ID:\t\n` keeps the padding after the label, as kubectl prints it
    assert tabbed("  Container ID:\t\n  Image:\tnginx\n") == "  Container ID:  \n  Image:         nginx\n"


def test_nested_blocks_as_describe_conditions() -> None:
    text = "Conditions:\n  Type\tStatus\n  Ready \tTrue \nVolumes:\t<none>\n"
    assert tabbed(text) == "Conditions:\n  Type    Status\n  Ready   True \nVolumes:  <none>\n"


def test_kubectl_get_settings_remember_widths_across_flushes() -> None:
    out = io.StringIO()
    w = TabWriter(out, minwidth=6, tabwidth=4, padding=3, remember_widths=True)
    w.write("NAME\tAGE\nx\t1s\n")
    w.flush()
    w.write("longername\t2s\n")
    w.flush()
    w.write("y\t3s\n")
    w.flush()
    assert out.getvalue() == "NAME   AGE\nx      1s\nlongername   2s\ny            3s\n"
    w.forget_widths()
    w.write("z\t4s\n")
    w.flush()
    assert out.getvalue().endswith("\nz     4s\n")  # minwidth 6 again


def test_unicode_width_counts_characters() -> None:
    assert tabbed("é\tx\nab\ty\n") == "é   x\nab  y\n"
