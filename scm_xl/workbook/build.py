"""Write the workbook's sheets that have no module of their own: the workings, the cells, the
first-principles tables and the README, with their print setup; and save a built workbook
atomically (`save_atomic`).

`registry.py` decides which sheets there are and in what order, and calls the writers here; the
other sheets' writers are in their own modules. The charts that depend on the data are added by
`charts.add_line_charts` once the rows are known.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from openpyxl.styles import Alignment
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.errors import InputError
from scm_xl.outputs import replacing
from scm_xl.rules import verdict_rule
from scm_xl.workbook.catalog_tables import CatalogLayout, physics_column_formulas, write_tables
from scm_xl.workbook.first_principles import LAST_ROW as CALCULATOR_LAST_ROW, write_calculator
from scm_xl.workbook.formulas import Formulas
from scm_xl.workbook.stamp import BuiltWorkbook, PendingFills, write_filled
from scm_xl.workbook.printing import PAGE_WIDTH_CHARS, pages_for, print_setup
from scm_xl.workbook.layout import CELLS_TABLE, SEEN_MODELS_TABLE, Layout, unusable_tests, workings_columns
from scm_xl.workbook.styles import DEFAULT_FONT_SIZE, HEADER_FILL, HEADER_FONT, TITLE_FONT, _formula, _header, fit_row

BUILD_TIMESTAMP = datetime(2026, 1, 1, 0, 0, 0)

LABELS = {
    "zh": {
        "calibration_title": "系数标定：TPS = BaseTPS × f(并发) × K_len(max_tokens) × K_in(提示长度) ÷ C_model(模型)",
        "settings": "设置（B列留空 = 自动）",
        "input": "手工输入",
        "effective": "生效值",
        "base_model": "基准模型",
        "base_max_tokens": "基准 max_tokens",
        "base_concurrency": "基准并发",
        "monotonic_tolerance_pct": "单调性容差 %",
        "strict_physics": "严格物理检查（1 = 剔除有物理警告的行）",
        "short_output_ratio": "输出过短阈值（实际/请求 Token 比例）",
        "physics_precision": "物理检查的权重精度（字节数在D列）",
        "method": "推导所用方法（chain = 文章的链式；lsq = 最小二乘）",
        "base_prompt_level": "基准提示长度档位（BaseTPS、f、K_len、C_model 在此档位标定；留空 = 最小档位）",
        "base_tps": "BaseTPS（基准点几何均值）",
        "base_rows": "基准点行数",
        "c_table": "并发增益 f(c) = TPS(c, 基准长度) / BaseTPS",
        "l_table": "长度系数 K_len(L) = TPS(锚定并发, L) / (BaseTPS × f(锚定并发))",
        "p_table": "提示长度系数 K_in(P) = TPS(锚定并发, 基准长度, P) / (BaseTPS × f(锚定并发))；K_in(基准档位) = 1",
        "m_table": "模型系数 C_model(m) = BaseTPS / TPS(m 的基准点)",
        "max_latency": "P95 延迟上限 (s)（留空 = 不限）",
        "inverse_note": "只在已测并发档位中选择；设置延迟上限时，用该档位实测 P95 延迟（无故障运行的中位数），未测的档位不算满足。",
        "consistency_title": "自洽检验：只有“check”行（系数全部来自其他行）才是真正的检验",
        "check_rows": "检验行数 (check)",
        "identify_rows": "标定行数 (identify)",
        "unidentified_rows": "无法预测行数 (unidentified)",
        "excluded_rows": "剔除行数 (excluded)",
        "mape": "平均偏差率 MAPE %（仅检验行）",
        "max_deviation": "最大偏差率 %（仅检验行）",
        "verdict": "判定",
        "verdict_rule": verdict_rule("zh", "检验行"),
        "derivation_title": "双向推导",
        "inputs_note": "B列的输入取自总览表：请在总览表的黄色单元格输入。",
        "forward": "正向预测：给定配置 → TPS",
        "inverse": "反向求解：目标 TPS → 最小已测并发",
        "concurrency": "并发数",
        "max_tokens": "max_tokens",
        "model": "模型（留空 = 基准模型）",
        "prompt_tokens": "提示长度 Token（留空 = 基准档位）",
        "prompt_low": "下方已知档位", "prompt_high": "上方已知档位", "prompt_k_low": "其 K_in", "prompt_k_high": "其 K_in",
        "coefficient": "系数",
        "effective_model": "生效模型",
        "forward_tps": "预测 TPS",
        "forward_missing": "缺少的系数",
        "target_tps": "目标 TPS",
        "recommended_concurrency": "推荐并发",
        "recommended_tps": "推荐并发下的预测 TPS",
        "best_tps": "可达最高 TPS（对偶问题）",
        "best_concurrency": "最高 TPS 的并发",
        "inverse_table": "各已测并发档位的预测",
    },
    "en": {
        "calibration_title": "Calibration: TPS = BaseTPS × f(concurrency) × K_len(max_tokens) × K_in(prompt) ÷ "
                             "C_model(model)",
        "settings": "Settings (leave column B blank = automatic)",
        "input": "hand-set",
        "effective": "effective",
        "base_model": "base model",
        "base_max_tokens": "base max_tokens",
        "base_concurrency": "base concurrency",
        "monotonic_tolerance_pct": "monotonic tolerance %",
        "strict_physics": "strict physics (1 = exclude rows with physics warnings)",
        "short_output_ratio": "short-output threshold (output / requested tokens)",
        "physics_precision": "weight precision for physics checks (bytes in D)",
        "method": "method for forward and inverse (chain = the article's; lsq = least squares)",
        "base_prompt_level": "base prompt level (BaseTPS, f, K_len and C_model are calibrated there; blank = the "
                             "smallest)",
        "base_tps": "BaseTPS (geometric mean at the base point)",
        "base_rows": "rows at the base point",
        "c_table": "Concurrency gain f(c) = TPS(c, base length) / BaseTPS",
        "l_table": "Length factor K_len(L) = TPS(anchor c, L) / (BaseTPS × f(anchor c))",
        "p_table": "Prompt factor K_in(P) = TPS(anchor c, base length, P) / (BaseTPS × f(anchor c)); K_in(base level) = 1",
        "m_table": "Model cost C_model(m) = BaseTPS / TPS(m at the base point)",
        "max_latency": "P95 latency limit (s) (blank = none)",
        "inverse_note": "Chooses among measured concurrency levels only; with a latency limit, a level counts only when its measured P95 latency (median over fault-free runs) is within it.",
        "consistency_title": "Consistency: only 'check' rows (all coefficients from other rows) test the model",
        "check_rows": "check rows",
        "identify_rows": "identify rows",
        "unidentified_rows": "unidentified rows",
        "excluded_rows": "excluded rows",
        "mape": "MAPE % (check rows only)",
        "max_deviation": "max |deviation| % (check rows only)",
        "verdict": "verdict",
        "verdict_rule": verdict_rule("en", "check rows"),
        "derivation_title": "Forward and inverse",
        "inputs_note": "The inputs in column B are read from the Summary: type them in its yellow cells.",
        "forward": "Forward: configuration → TPS",
        "inverse": "Inverse: target TPS → smallest measured concurrency",
        "concurrency": "concurrency",
        "max_tokens": "max_tokens",
        "model": "model (blank = base model)",
        "prompt_tokens": "prompt tokens (blank = the base prompt level)",
        "prompt_low": "known level below", "prompt_high": "known level above", "prompt_k_low": "its K_in",
        "prompt_k_high": "its K_in",
        "coefficient": "coefficient",
        "effective_model": "effective model",
        "forward_tps": "predicted TPS",
        "forward_missing": "missing coefficients",
        "target_tps": "target TPS",
        "recommended_concurrency": "recommended concurrency",
        "recommended_tps": "predicted TPS there",
        "best_tps": "best reachable TPS (the dual answer)",
        "best_concurrency": "concurrency of the best TPS",
        "inverse_table": "Prediction at each measured concurrency level",
    },
}

README_TEXT = {
    "zh": [
        "SCM 系数标定工作簿（scm-xl 生成）",
        "",
        "模型：TPS = BaseTPS × f(并发) × K_len(max_tokens) × K_in(提示长度) ÷ C_model(模型)",
        "黄色单元格是输入，灰色单元格是公式，浅蓝色是结论。正向、反向的问题和方法只在总览表输入。除原始数据表外，各表均有工作表保护（无密码）：公式已锁定，无法覆盖。",
        "",
        "各工作表：",
        "总览：打开时看到的第一页。判定（颜色：绿 excellent、蓝 good、红 fail、黄 insufficient）、检验行数、MAPE、最大偏差、留一法误差、物理警告数、系数一览、正反向答案和图表。",
        "原始数据：每行一次实验，可以直接插入、删除、排序行，或在数据下方接着输入新行，所有结果随之更新。TPS、角色、状态说明三列自动显示每行的结果：被剔除或无法使用（例如数字被输入成文本）的原因写在这里。",
        "系数标定：按文章的链式方法标定。基准点默认取第一个模型、max_tokens=50（没有则取最小长度）、最低并发，可在B列手工指定。重复实验取几何均值。有提示长度档位（prompt_level 列）时，BaseTPS、f、K_len、C_model 在基准档位标定，"
        "K_in(P) = 各档位相对基准档位的系数（提示长度为空的行算作基准档位）。",
        "自洽检验：每行一个角色。identify = 这一行本身定义了某个系数（偏差按构造为0；重复实验时为各次相对其均值的离散，均值定义系数；都不是检验）；check = 它用到的系数全部来自其他行（真正的检验）；unidentified = 缺少系数；excluded = 被过滤。判定只看 check 行；没有 check 行时为 insufficient，绝不算通过。",
        "双向推导：正向预测给定配置的 TPS；反向求达到目标 TPS 的最小已测并发（可设 P95 延迟上限），以及对偶问题（可达最高 TPS）。两者都可输入提示长度 Token（留空 = 基准档位；两个已测档位之间按对数插值 K_in，范围之外无法预测）。",
        "重复实验：同一配置多次测量的中位数、变异系数（CV）和需要的重复次数。",
        "最小二乘：对全部纳入行做对数空间最小二乘，给出系数和留一法（LOO）预测误差；计算过程的矩阵列已折叠隐藏。",
        "延迟模型：延迟 = 首字时间 + (L − 1) × 字间隔，TPS = n × L ÷ 延迟（利特尔定律），字间隔与首字时间各为一个按相对误差加权的最小二乘，"
        "覆盖提示长度与并发；拐点 K（吞吐不再增长的并发）由 scm-xl fill 拟合，可手工改写；下方可输入并发、max_tokens 和提示长度做正向预测。",
        "SLO达成：逐请求 SLO（DistServe 定义：成功且满足每个已设阈值的请求为好请求）下每个实验和每个配置的达成率、Wilson 95% 区间和 goodput，"
        "以及在目标 TPS 下满足 SLO 的最便宜实测配置；阈值与达成目标在总览表输入，逐请求记录在隐藏的计算_逐请求表。",
        "第一性原理：屋顶线计算器（每 Token 2N FLOPs、权重字节 ÷ 显存带宽、KV 缓存容量）和 GPU/模型目录，物理检查以此为上限。",
        "说明：本页。",
        "计算_逐行（至计算_逐行5：一张逐行计算表分列在五张表上）、计算_单元、计算_图表、计算_逐请求：隐藏的中间计算表（右键“取消隐藏”可查看），请勿编辑。",
        "",
        "可覆盖的行数：公式覆盖原始数据表的前若干行（见隐藏的 _scm_meta 表 rows）；超出的行 scm-xl verify 会指出。",
        "校验：scm-xl verify 本文件 —— 用真实公式引擎重算每个公式单元格，并与 Python 参考实现逐一比较。",
    ],
    "en": [
        "SCM calibration workbook (built by scm-xl)",
        "",
        "Model: TPS = BaseTPS × f(concurrency) × K_len(max_tokens) × K_in(prompt length) ÷ C_model(model)",
        "Yellow cells are inputs, grey cells are formulas, pale blue cells are the answers. The forward and inverse questions and the method are typed on the Summary only. Every sheet but RawData is protected without a password: the formulas are locked and cannot be typed over.",
        "",
        "The sheets:",
        "Summary: the page the workbook opens on. The verdict (green excellent, blue good, red fail, yellow insufficient), check rows, MAPE, max deviation, the hold-out error, physics warnings, the coefficients at a glance, the forward and inverse answers, and the charts.",
        "RawData: one experiment per row. Insert, delete or sort rows, or type a new row under the data, and every result follows. The TPS, role and status columns show what became of each row: the reason a row is excluded or unusable (a number typed as text, say) is written there.",
        "Calibration: the article's chain. The base point defaults to the first model, max_tokens 50 (else the smallest length) and the lowest concurrency; set them by hand in column B. Replicates are combined by their geometric mean. With prompt levels (the prompt_level column), BaseTPS, f, K_len and C_model are calibrated at the base prompt level and K_in(P) is each level's factor against it (a row with a blank prompt level counts as the base level).",
        "Consistency: each row has a role. identify = the row defines a coefficient (deviation 0 by construction; replicated, each replicate's spread around the mean that defines it; not a test either way); check = every coefficient it needs came from other rows (the real test); unidentified = a coefficient is missing; excluded = filtered out. The verdict uses check rows only; with none it is 'insufficient', never a pass.",
        "Derivation: forward prediction for a configuration; inverse: the smallest measured concurrency that meets a target TPS (optionally within a P95 latency limit), and the dual (best reachable TPS). Both take a prompt length in tokens (blank = the base prompt level; between two measured levels K_in is interpolated in log-log, outside them there is no answer).",
        "Replicates: the median, coefficient of variation and repeats needed of each configuration measured more than once.",
        "LeastSquares: a least-squares fit in log space over all included rows, with the coefficients and the leave-one-out (hold-out) error; the matrix workings are grouped and collapsed.",
        "LatencyModel: latency = TTFT + (L − 1) × ITL and TPS = n × L ÷ latency (Little's law), ITL and TTFT each a least-squares fit weighted to relative error, over prompt length and concurrency; the knee K (where throughput stops growing) is fitted by scm-xl fill and may be typed over; type a concurrency, max_tokens and prompt length below it for a forward prediction.",
        "SLO: under a per-request SLO (the DistServe definition: a request is good when it succeeded and every threshold set holds), each experiment's and configuration's attainment, its Wilson 95% interval and goodput, and the cheapest measured configuration meeting the SLO at the target TPS; the thresholds and the attainment target are typed on the Summary, the records are on the hidden Work_Requests sheet.",
        "FirstPrinciples: the roofline calculator (2N FLOPs per token, weight bytes / memory bandwidth, KV cache capacity) and the GPU/model catalog the physics checks use.",
        "README: this page.",
        "Work_Rows (to Work_Rows5: one per-row table, its columns wrapped onto five sheets), Work_Cells, Work_Charts, Work_Requests: hidden workings (right-click a tab, Unhide, to look); do not edit them.",
        "",
        "Rows covered: the formulas cover the first rows of RawData (see 'rows' on the hidden _scm_meta sheet); scm-xl verify names any row beyond them.",
        "Check it: scm-xl verify THIS_FILE recalculates every formula cell with a real engine and compares it with the Python reference.",
    ],
}


def write_first_principles(ws: Worksheet, layout: Layout, catalog_layout: CatalogLayout) -> dict[str, str]:
    """The roofline calculator and the catalog; returns the calculator's defined names."""
    write_tables(ws, catalog_layout)
    names = write_calculator(ws, layout.lang, catalog_layout)
    bytes_ref = layout.name_ref("PhysicsBytes")
    for row in range(catalog_layout.model_first, catalog_layout.model_last + 1):
        for field, text in physics_column_formulas(catalog_layout, bytes_ref, row).items():
            col = get_column_letter(catalog_layout.model_col(field))
            if row == catalog_layout.model_first:
                ws[f"{col}{catalog_layout.model_header}"] = field
                ws[f"{col}{catalog_layout.model_header}"].font = HEADER_FONT
                ws[f"{col}{catalog_layout.model_header}"].fill = HEADER_FILL
            _formula(ws, f"{col}{row}", text)
    # The printout holds the calculator; the catalog below it is reference data (with its sources).
    ws.print_area = f"A1:H{CALCULATOR_LAST_ROW}"
    print_setup(ws, pages_tall=pages_for(CALCULATOR_LAST_ROW))
    return names


def write_readme(ws: Worksheet, lang: str) -> None:
    """One paragraph a row, wrapped within the printed page's width, each row as tall as its
    lines (no program sizes a wrapped row of an .xlsx it opens: without a height the lines
    print on top of each other)."""
    width = PAGE_WIDTH_CHARS - 5
    ws.column_dimensions["A"].width = width
    for i, line in enumerate(README_TEXT[lang], start=1):
        cell = ws.cell(row=i, column=1, value=line)
        cell.alignment = Alignment(wrap_text=True, vertical="top")
        fit_row(ws, i, [(line, width, DEFAULT_FONT_SIZE)])
    ws["A1"].font = TITLE_FONT
    fit_row(ws, 1, [(README_TEXT[lang][0], width, float(TITLE_FONT.sz or DEFAULT_FONT_SIZE))])
    ws.print_area = f"A1:A{len(README_TEXT[lang])}"
    print_setup(ws, pages_tall=pages_for(len(README_TEXT[lang])))


def write_workings_rows(ws: Worksheet, layout: Layout, fx: Formulas, sheet_key: str, fills: PendingFills) -> None:
    """One of the workings sheets: its share of the workings columns (`workings_columns`)."""
    columns = workings_columns(sheet_key)
    _header(ws, layout.raw_header_row, 1, columns, layout.lang)
    ws.freeze_panes = f"A{layout.raw_first}"
    rows = range(layout.raw_first, layout.raw_last + 1)
    position_offset = 1 - layout.raw_first  # position k = row + offset
    letters = {column.key: layout.raw_col(column.key) for column in columns}

    def template(row: int) -> dict[str, str]:
        formulas = fx.raw_row(row)
        return {key: formulas[key] for key in letters}

    write_filled(ws, fills, letters, template, rows, position_offset)
    for key, number_format in (("tps", "0.00"), ("ln_tps", "0.0000")):
        if key in letters:
            ws.column_dimensions[letters[key]].number_format = number_format
    if layout.raw_sheet("unusable") == sheet_key:
        ws[f"{layout.messages_col}1"] = "unusable_messages"
        for code, (_, _, message) in enumerate(unusable_tests(layout.lang), start=1):
            ws[f"{layout.messages_col}{1 + code}"] = message


def write_cells(ws: Worksheet, layout: Layout, fx: Formulas, fills: PendingFills) -> None:
    _header(ws, layout.cells_header_row, 1, CELLS_TABLE, layout.lang)
    ws.freeze_panes = f"A{layout.cells_first}"
    slot_col = layout.table_col(CELLS_TABLE, "slot")
    letters = {column.key: layout.table_col(CELLS_TABLE, column.key) for column in CELLS_TABLE}
    for i in range(layout.cell_slots):
        ws[f"{slot_col}{layout.cells_first + i}"] = i + 1
    rows = range(layout.cells_first, layout.cells_last + 1)
    for key, text in fx.cells_row(rows[0]).items():  # the first cell has no cell above it
        ws[f"{letters[key]}{rows[0]}"] = text
    write_filled(ws, fills, letters, fx.cells_row, rows[1:], -1)
    _header(ws, layout.cells_header_row, layout.seen_models_start, SEEN_MODELS_TABLE, layout.lang)
    for row in range(layout.cells_first, layout.cells_first + layout.m_slots):
        for key, text in fx.seen_model_row(row).items():
            ws[f"{layout.seen_models_col(key)}{row}"] = text
    for key, text in fx.scales().items():
        ws[f"{layout.scale_col(key)}{layout.cells_first}"] = text
        ws[f"{layout.scale_col(key)}{layout.cells_header_row}"] = key


def save_atomic(built: BuiltWorkbook, path: str | Path, *, reproducible: bool = False) -> None:
    """Save through `outputs.replacing`: a unique temporary file beside the target, renamed
    when complete (through a symlink, with the user's umask).

    reproducible fixes the zip timestamps and the document's modified time, so the
    same build gives the same bytes (the committed template is checked that way).
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise InputError(f"folder does not exist: {path.parent}", path=str(path))
    try:
        with replacing(path) as temporary:
            built.save(temporary)
            if reproducible:
                _freeze_zip(str(temporary))
    except OSError as exc:
        raise InputError(f"cannot write workbook: {exc.strerror or exc}", path=str(path)) from exc


def _freeze_zip(path: str) -> None:
    import re
    import zipfile

    with zipfile.ZipFile(path) as zf:
        members = [(info.filename, zf.read(info.filename)) for info in zf.infolist()]
    stamp = BUILD_TIMESTAMP.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            if name == "docProps/core.xml":
                data = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*(</dcterms:modified>)", rb"\g<1>" + stamp + rb"\g<2>",
                              data)
            info = zipfile.ZipInfo(name, date_time=BUILD_TIMESTAMP.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
