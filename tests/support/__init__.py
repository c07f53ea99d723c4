"""The tests' shared toolbox: one home for what several test modules use.

* `support.paths`: the example data (the article's CSV) and the repository's folders.
* `support.rows`: the one row factory, `make_row` (tests/data/gen.py builds its designs on it).
* `support.engines`: the engines a workbook is checked on, as pytest parameters.
* `support.parallel`: run independent slow measurements at once (each on a simulator of its own).
* `support.latency`: the simulator design the latency tests share, and its measurements.
* `support.reports`: the report pages in both languages; a verification that finds one wrong cell.

Test modules import from here (or from `data.gen`), never from one another.
"""
