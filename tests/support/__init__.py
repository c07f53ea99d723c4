"""The tests' shared toolbox: one home for what several test modules use.

* `support.paths`: the example data (the article's CSV) and the repository's folders.
* `support.rows`: the one row factory, `make_row` (tests/data/gen.py builds its designs on it).
* `support.engines`: the engines a workbook is checked on, as pytest parameters; a small workbook
  of every value kind with what each engine must compute (`write_workbook`, `EXPECTED`); the
  error strings a spreadsheet shows in a cell; what a verify's engine computed (`computed`).
* `support.parallel`: run independent slow measurements at once (each on a simulator of its own).
* `support.latency`: the simulator design the latency tests share, and its measurements.
* `support.reports`: the report pages in both languages; a verification that finds one wrong cell;
  the page's charts and calculator rows.
* `support.servers`: raw HTTP servers on 127.0.0.1 that speak SSE, the fake LLM fixture, a
  collection run through the CLI, the request readers the collector tests share, and a plain
  httpx client for them (`http_client`, one SSL context for all).
* `support.goodput`: per-request records counted by hand (`HAND`) and the files they are written to.
* `support.books`: one sheet of a workbook read without parsing the others (`sheet`, `sheets`;
  `worksheet` with its styles and setup), the layout its meta sheet gives (`layout`), its sheets
  and names (`outline`), and a few cells typed into a copy, every other byte kept (`retyped`).
* `support.source`: a source text parsed once (`parsed`), for the tests that read the code.
* `support.printing`: a workbook printed to PDF by LibreOffice as a person's prints it.
* `support.browser`, `support.slo`, `support.cli`, `support.text`: headless Chromium, the SLO tests'
  fixed-delay collection, the CLI runner, reading printed tables.

Test modules import from here (or from `data.gen`), never from one another (test_house checks it).
"""
