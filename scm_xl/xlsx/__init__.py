"""The byte layer: xlsx files as zip packages of XML parts, read and written without a workbook object.

Nothing here imports `scm_xl.workbook` or `scm_xl.engines`; both import from here.

- `package`: the package's parts (sheet parts by title, shared strings), sheet XML streamed in
  blocks of whole rows, the `<c>`/`<row>` patterns its readers share, column names, and
  `copy_package`, the one copy of a package (staged beside the target, then replaced) that
  rewrites the parts it is asked to, deflating them from a thread. (`cached_values` keeps its
  own `<c>` pattern, which captures what it rewrites in place; `engines.libreoffice` its own
  `<col>` pattern.)
- `fills`: the middle cells of shared-formula columns, which the workbook object never held,
  spliced into a saved sheet's XML.
- `cached_values`: an engine's computed values stored beside the formulas (and the height of a
  row whose wrapped value needs more lines), in one pass from openpyxl's own file.
- `values`: many cell values held column by column (`CellGrid`), and the value types
  (`CellValue`, `CellError`) every engine returns and `verify` compares.
- `text_fit`: the room text takes in a cell (width, wrapped lines, row height).
"""
