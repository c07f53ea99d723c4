/* The live calculator: forward and inverse from the calibration embedded in this page.
 *
 * It repeats, step for step and in the same order of operations, the arithmetic of
 * `scm-xl predict` (scm_xl.model.predict, scm_xl.lsq.LsqFit.forecast) and of
 * `scm-xl solve --method chain|lsq` (scm_xl.constrained.solve), so both agree to rounding.
 * No network, no libraries.
 */
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("scm-calibration").textContent);
  var TEXT = JSON.parse(document.getElementById("scm-texts").textContent);

  // ---------------------------------------------------------------- helpers
  var KEYS = {};  // display name -> casefolded key (Python's str.casefold, computed server-side)
  [DATA.chain, DATA.lsq.calibration].forEach(function (cal) {
    cal.c_model.forEach(function (m) { KEYS[m[0]] = m[1]; });
  });
  function keyOf(model) {
    return Object.prototype.hasOwnProperty.call(KEYS, model) ? KEYS[model] : model.toLowerCase();
  }
  function numText(v) { return String(v); }
  function fLabel(c) { return "f(" + numText(c) + ")"; }
  function kLabel(l) { return "K_len(" + numText(l) + ")"; }
  function cLabel(m) { return "C_model(" + m + ")"; }

  function levelValue(pairs, level) {
    for (var i = 0; i < pairs.length; i++) if (pairs[i][0] === level) return pairs[i][1];
    return null;
  }
  function modelValue(cal, model) {
    var key = keyOf(model);
    for (var i = 0; i < cal.c_model.length; i++) if (cal.c_model[i][1] === key) return cal.c_model[i][2];
    return null;
  }

  // lsq.concurrency_blend: ln f(c) as a weighted sum of ln f at measured levels.
  function concurrencyBlend(c, levels, extrapolate) {
    var ordered = levels.slice().filter(function (v, i, a) { return a.indexOf(v) === i; })
      .sort(function (a, b) { return a - b; });
    if (ordered.indexOf(c) >= 0) return { weights: [[c, 1.0]], interpolated: false, extrapolated: false };
    if (c <= 0 || ordered.length < 2) return null;
    var first = ordered[0], last = ordered[ordered.length - 1];
    var inside = first < c && c < last;
    if (!inside && !extrapolate) return null;
    var low, high;
    if (inside) {
      var upper = 0;
      while (!(ordered[upper] > c)) upper++;
      low = ordered[upper - 1]; high = ordered[upper];
    } else if (c < first) {
      low = ordered[0]; high = ordered[1];
    } else {
      low = ordered[ordered.length - 2]; high = last;
    }
    var weight = (Math.log(c) - Math.log(low)) / (Math.log(high) - Math.log(low));
    return { weights: [[low, 1.0 - weight], [high, weight]], interpolated: inside, extrapolated: !inside };
  }

  // ---------------------------------------------------------------- chain
  // scm_xl.model.predict: measured concurrency levels only.
  function chainPredict(c, maxTokens, model) {
    var cal = DATA.chain;
    model = model || cal.base_model || "";
    var f = levelValue(cal.f, c), k = levelValue(cal.k_len, maxTokens), cm = modelValue(cal, model);
    var missing = [];
    if (f === null) missing.push(fLabel(c));
    if (k === null) missing.push(kLabel(maxTokens));
    if (cm === null) missing.push(cLabel(model));
    if (missing.length || cal.base_tps === null) return { tps: null, missing: missing };
    return { tps: cal.base_tps * f * k / cm, missing: [] };
  }

  // constrained.chain_surface's forecast: log-log interpolation between known levels.
  function chainForecast(c, maxTokens, model, extrapolate) {
    var cal = DATA.chain;
    var known = cal.f.filter(function (p) { return p[1] !== null; }).map(function (p) { return p[0]; });
    var blend = concurrencyBlend(c, known, extrapolate);
    var k = levelValue(cal.k_len, maxTokens), cm = modelValue(cal, model);
    if (blend === null || k === null || cm === null || cal.base_tps === null) return { tps: null };
    var logF = 0;
    blend.weights.forEach(function (w) { logF += w[1] * Math.log(levelValue(cal.f, w[0])); });
    return { tps: cal.base_tps * Math.exp(logF) * k / cm, mean_interval: null, prediction_interval: null,
             interpolated: blend.interpolated, extrapolated: blend.extrapolated };
  }

  // ---------------------------------------------------------------- least squares
  function lsqVector(blend, maxTokens, model) {
    var L = DATA.lsq;
    var size = 1 + L.concurrency.length + L.max_tokens.length + L.model_keys.length;
    var x = [];
    for (var i = 0; i < size; i++) x.push(0.0);
    x[0] = 1.0;
    var offset = 1;
    for (var w = 0; w < blend.weights.length; w++) {
      var level = blend.weights[w][0];
      if (level !== L.base_concurrency) {
        var ci = L.concurrency.indexOf(level);
        if (ci < 0) return null;
        x[offset + ci] += blend.weights[w][1];
      }
    }
    offset += L.concurrency.length;
    if (maxTokens !== L.base_max_tokens) {
      var li = L.max_tokens.indexOf(maxTokens);
      if (li < 0) return null;
      x[offset + li] = 1.0;
    }
    offset += L.max_tokens.length;
    var key = keyOf(model);
    if (key !== L.base_model_key) {
      var mi = L.model_keys.indexOf(key);
      if (mi < 0) return null;
      x[offset + mi] = -1.0;
    }
    return x;
  }
  function dot(a, b) { var s = 0; for (var i = 0; i < a.length; i++) s += a[i] * b[i]; return s; }
  function estimable(x) {
    var P = DATA.lsq.null_projector, projected = [];
    for (var i = 0; i < P.length; i++) projected.push(dot(P[i], x));
    return dot(projected, projected) <= DATA.identified_tol * (1.0 + dot(x, x));
  }
  function quadratic(x, M) {  // x @ M @ x, as numpy evaluates it: (x @ M) then @ x
    var v = [];
    for (var j = 0; j < x.length; j++) {
      var s = 0;
      for (var i = 0; i < x.length; i++) s += x[i] * M[i][j];
      v.push(s);
    }
    return dot(v, x);
  }

  // scm_xl.lsq.LsqFit.forecast
  function lsqForecast(c, maxTokens, model, extrapolate) {
    var L = DATA.lsq, cal = L.calibration;
    model = model || cal.base_model || "";
    if (!L.available) return { tps: null, missing: ["no data"], interpolated: false, extrapolated: false };
    var levels = L.measured_concurrency;
    var blend = concurrencyBlend(c, levels, extrapolate);
    if (blend === null) {
      var reason = levels.length ? fLabel(c) + " is outside the measured range" : fLabel(c);
      return { tps: null, missing: [reason], interpolated: false, extrapolated: false };
    }
    var x = lsqVector(blend, maxTokens, model);
    if (x === null || !estimable(x)) {
      var missing = [];
      if (levelValue(cal.k_len, maxTokens) === null) missing.push(kLabel(maxTokens));
      if (modelValue(cal, model) === null) missing.push(cLabel(model));
      if (!missing.length) missing.push("not identified by the data");
      return { tps: null, missing: missing, interpolated: blend.interpolated, extrapolated: blend.extrapolated };
    }
    var logTps = dot(x, L.beta);
    var meanInterval = null, predictionInterval = null;
    if (L.sigma !== null) {
      var variance = Math.max(L.sigma ** 2 * quadratic(x, L.xtx_pinv), 0.0);
      var spreadMean = L.t * Math.sqrt(variance);
      var spreadNew = L.t * Math.sqrt(variance + L.sigma ** 2);
      meanInterval = [Math.exp(logTps - spreadMean), Math.exp(logTps + spreadMean)];
      predictionInterval = [Math.exp(logTps - spreadNew), Math.exp(logTps + spreadNew)];
    }
    return { tps: Math.exp(logTps), missing: [], mean_interval: meanInterval, prediction_interval: predictionInterval,
             interpolated: blend.interpolated, extrapolated: blend.extrapolated };
  }

  // `scm-xl predict --json`
  function predict(method, c, maxTokens, model, extrapolate) {
    if (method === "chain") {
      var p = chainPredict(c, maxTokens, model);
      return { tps: p.tps, missing: p.missing, method: "chain" };
    }
    var f = lsqForecast(c, maxTokens, model, extrapolate);
    return { tps: f.tps, missing: f.missing, method: "lsq", tps_interval: f.mean_interval || null,
             tps_prediction_interval: f.prediction_interval || null,
             interpolated: f.interpolated, extrapolated: f.extrapolated };
  }

  // ---------------------------------------------------------------- the constrained inverse
  function surface(method) {
    var cal = method === "lsq" ? DATA.lsq.calibration : DATA.chain;
    var levels = method === "lsq" ? DATA.lsq.measured_concurrency
      : DATA.chain.f.filter(function (p) { return p[1] !== null; }).map(function (p) { return p[0]; });
    return {
      method: method,
      forecast: method === "lsq" ? function (c, l, m) { return lsqForecast(c, l, m, true); }
        : function (c, l, m) { return chainForecast(c, l, m, true); },
      concurrency_levels: levels,
      max_tokens_levels: cal.k_len.filter(function (p) { return p[1] !== null; }).map(function (p) { return p[0]; }),
      models: cal.c_model.filter(function (m) { return m[2] !== null; })
    };
  }

  function cellOf(key, c, l) {
    for (var i = 0; i < DATA.cells.length; i++) {
      var cell = DATA.cells[i];
      if (cell[0] === key && cell[1] === c && cell[2] === l) return { latency: cell[3], ttft: cell[4] };
    }
    return null;
  }

  function rejections(model, key, c, l, forecast, cell, cons, extrapolate) {
    var reasons = [];
    if (cons.models !== null && cons.models.indexOf(key) < 0) reasons.push("model");
    if (cons.max_tokens !== null && cons.max_tokens.indexOf(l) < 0) reasons.push("max_tokens");
    if (cons.max_concurrency !== null && c > cons.max_concurrency) reasons.push("max_concurrency");
    var onset = cons.rate_limit !== null ? cons.rate_limit
      : (Object.prototype.hasOwnProperty.call(DATA.onsets, key) ? DATA.onsets[key] : null);
    if (onset !== null && c >= onset) reasons.push("rate_limit");
    if (forecast.extrapolated && !extrapolate) reasons.push("extrapolation");
    [[cons.max_latency_p95, cell ? cell.latency : null, "latency_p95"],
     [cons.max_ttft_p95, cell ? cell.ttft : null, "ttft_p95"]].forEach(function (item) {
      if (item[0] === null) return;
      if (item[1] === null) reasons.push(item[2] + "_unmeasured");
      else if (item[1] > item[0]) reasons.push(item[2]);
    });
    return reasons;
  }

  function costLess(a, b) {  // Candidate.cost: (concurrency, C_model, max_tokens, model casefolded)
    if (a.concurrency !== b.concurrency) return a.concurrency < b.concurrency;
    if (a.c_model !== b.c_model) return a.c_model < b.c_model;
    if (a.max_tokens !== b.max_tokens) return a.max_tokens < b.max_tokens;
    return a.key < b.key;
  }
  function costCompare(a, b) { return costLess(a, b) ? -1 : (costLess(b, a) ? 1 : 0); }

  function candidateDict(c) {
    return { model: c.model, concurrency: c.concurrency, max_tokens: c.max_tokens, tps: c.tps,
             tps_interval: c.mean_interval, tps_prediction_interval: c.prediction_interval,
             interpolated: c.interpolated, extrapolated: c.extrapolated,
             latency_p95_s: c.latency_p95_s, ttft_p95_s: c.ttft_p95_s, rejected_by: c.rejected_by };
  }

  // scm_xl.constrained.solve, answered as `scm-xl solve --method M --json` prints it.
  function solve(method, target, cons, extrapolate, conservative) {
    var s = surface(method);
    var top = s.concurrency_levels.length ? Math.max.apply(null, s.concurrency_levels) : 0;
    var cap = Math.max(DATA.search_factor * top, cons.max_concurrency || 0);
    var notes = [];
    var candidates = [];
    s.models.forEach(function (m) {
      s.max_tokens_levels.forEach(function (l) {
        for (var c = 1; c <= cap; c++) {
          var f = s.forecast(c, l, m[0]);
          if (f.tps === null) continue;
          var cell = cellOf(m[1], c, l);
          candidates.push({
            model: m[0], key: m[1], concurrency: c, max_tokens: l, c_model: m[2], tps: f.tps,
            mean_interval: f.mean_interval || null, prediction_interval: f.prediction_interval || null,
            interpolated: f.interpolated, extrapolated: f.extrapolated,
            latency_p95_s: cell ? cell.latency : null, ttft_p95_s: cell ? cell.ttft : null,
            rejected_by: rejections(m[0], m[1], c, l, f, cell, cons, extrapolate)
          });
        }
      });
    });
    candidates.sort(costCompare);
    function reaches(c) {
      if (conservative && c.mean_interval !== null) return c.mean_interval[0] >= target;
      return c.tps >= target;
    }
    var reaching = candidates.filter(reaches);
    var passing = candidates.filter(function (c) { return !c.rejected_by.length; });
    var cheapest = null;
    for (var i = 0; i < reaching.length; i++) if (!reaching[i].rejected_by.length) { cheapest = reaching[i]; break; }
    var stopped = reaching.filter(function (c) {
      return c.rejected_by.length && (cheapest === null || costLess(c, cheapest));
    });
    var blocked = stopped.length ? stopped[0] : null;
    var binding = blocked ? blocked.rejected_by.slice() : ["target_tps"];
    var best = null;
    if (passing.length) {
      var topTps = Math.max.apply(null, passing.map(function (c) { return c.tps; }));
      best = passing.filter(function (c) { return c.tps === topTps; })[0];
    }
    var higher = candidates.filter(function (c) { return c.rejected_by.length && (best === null || c.tps > best.tps); });
    var bestBlocked = null;
    if (higher.length) {
      var topHigher = Math.max.apply(null, higher.map(function (c) { return c.tps; }));
      bestBlocked = higher.filter(function (c) { return c.tps === topHigher; })[0];
    }
    if (conservative && !candidates.some(function (c) { return c.mean_interval !== null; })) notes.push("no_interval");
    if (cheapest && cheapest.interpolated) notes.push("interpolated");
    if (cheapest && cheapest.extrapolated) notes.push("extrapolated");
    if (blocked && blocked.rejected_by.indexOf("extrapolation") >= 0) notes.push("needs_extrapolation");
    if (candidates.some(function (c) {
      return c.rejected_by.indexOf("latency_p95_unmeasured") >= 0 || c.rejected_by.indexOf("ttft_p95_unmeasured") >= 0;
    })) notes.push("unmeasured");
    return {
      concurrency: cheapest ? cheapest.concurrency : null, tps: cheapest ? cheapest.tps : null,
      reachable: cheapest !== null, max_tokens: cheapest ? cheapest.max_tokens : null,
      model: cheapest ? cheapest.model : null, method: method, target_tps: target,
      cheapest: cheapest ? candidateDict(cheapest) : null, binding: binding,
      blocked: blocked ? candidateDict(blocked) : null, best: best ? candidateDict(best) : null,
      best_binding: bestBlocked ? bestBlocked.rejected_by.slice() : [], notes: notes
    };
  }

  // ---------------------------------------------------------------- the page
  function $(id) { return document.getElementById(id); }
  function fmt(v, digits) { return v === null || v === undefined ? "-" : v.toFixed(digits === undefined ? 2 : digits); }
  function optionalNumber(el) { var t = el.value.trim(); return t === "" ? null : Number(t); }
  function checked(name) {
    var boxes = document.querySelectorAll("input[name='" + name + "']");
    var values = [], all = true;
    boxes.forEach(function (b) { if (b.checked) values.push(b.value); else all = false; });
    return { values: values, all: all };
  }
  function setResult(el, data, html) { el.setAttribute("data-result", JSON.stringify(data)); el.innerHTML = html; }
  function esc(t) {
    return String(t).replace(/[&<>"']/g, function (ch) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }[ch];
    });
  }
  function bindingText(codes) {
    return codes.length ? codes.map(function (c) { return TEXT.binding[c] || c; }).join(", ") : "-";
  }
  function config(c) {
    return esc(TEXT.config.replace("{c}", c.concurrency).replace("{l}", c.max_tokens).replace("{m}", c.model));
  }

  function nothingCalibrated(out) {
    if ($("fwd-model").options.length && $("fwd-max-tokens").options.length) return false;
    setResult(out, { error: "no_calibration" }, "<p class='warn'>" + esc(TEXT.no_calibration) + "</p>");
    return true;
  }

  function updateForward() {
    var out = $("forward-result");
    if (nothingCalibrated(out)) return;
    var method = $("fwd-method").value, c = Number($("fwd-concurrency").value);
    var l = Number($("fwd-max-tokens").value), model = $("fwd-model").value, extrapolate = $("fwd-extrapolate").checked;
    if (!(c > 0) || !(l >= 1) || !Number.isInteger(l)) {
      setResult(out, { error: "input" }, "<p class='warn'>" + esc(TEXT.bad_input) + "</p>");
      return;
    }
    var r = predict(method, c, l, model, extrapolate);
    if (r.tps === null) {
      setResult(out, r, "<p class='answer muted'>" + esc(TEXT.unidentified) + ": " + esc(r.missing.join(", ")) + "</p>");
      return;
    }
    var html = "<p class='answer'><span class='big'>" + fmt(r.tps) + "</span> TPS</p>";
    if (r.tps_interval) html += "<p>" + esc(TEXT.interval90) + ": " + fmt(r.tps_interval[0]) + " – " + fmt(r.tps_interval[1]) + "</p>";
    if (r.tps_prediction_interval) html += "<p class='muted'>" + esc(TEXT.prediction90) + ": " + fmt(r.tps_prediction_interval[0]) + " – " + fmt(r.tps_prediction_interval[1]) + "</p>";
    if (method === "chain") html += "<p class='muted'>" + esc(TEXT.chain_no_interval) + "</p>";
    if (r.interpolated) html += "<p class='muted'>" + esc(TEXT.note_interpolated) + "</p>";
    if (r.extrapolated) html += "<p class='warn'>" + esc(TEXT.note_extrapolated) + "</p>";
    setResult(out, r, html);
  }

  function updateInverse() {
    var out = $("inverse-result");
    if (nothingCalibrated(out)) return;
    var method = $("inv-method").value, target = Number($("inv-target").value);
    var lengths = checked("inv-length"), models = checked("inv-model");
    var cons = {
      max_latency_p95: optionalNumber($("inv-latency")), max_ttft_p95: optionalNumber($("inv-ttft")),
      max_concurrency: optionalNumber($("inv-max-concurrency")), rate_limit: optionalNumber($("inv-rate-limit")),
      max_tokens: lengths.all ? null : lengths.values.map(Number),
      models: models.all ? null : models.values.map(keyOf)
    };
    var bad = !(target > 0) || [cons.max_latency_p95, cons.max_ttft_p95].some(function (v) { return v !== null && !(v > 0); })
      || [cons.max_concurrency, cons.rate_limit].some(function (v) { return v !== null && !(Number.isInteger(v) && v >= 1); });
    if (bad) {
      setResult(out, { error: "input" }, "<p class='warn'>" + esc(TEXT.bad_input) + "</p>");
      return;
    }
    var r = solve(method, target, cons, $("inv-extrapolate").checked, $("inv-conservative").checked);
    var html;
    if (r.cheapest) {
      var iv = r.cheapest.tps_interval;
      html = "<p class='answer'>" + config(r.cheapest) + ": <span class='big'>" + fmt(r.cheapest.tps) + "</span> TPS</p>"
        + (iv ? "<p>" + esc(TEXT.interval90) + ": " + fmt(iv[0]) + " – " + fmt(iv[1]) + "</p>" : "");
    } else {
      html = "<p class='answer warn'>" + esc(TEXT.unreachable.replace("{t}", String(target))) + "</p>";
    }
    html += "<p>" + esc(TEXT.binding_label) + ": <b>" + esc(bindingText(r.binding)) + "</b></p>";
    if (r.best) {
      html += "<p>" + esc(TEXT.best_label) + ": " + fmt(r.best.tps) + " TPS — " + config(r.best)
        + " (" + esc(TEXT.bound_by) + " " + esc(bindingText(r.best_binding)) + ")</p>";
    }
    r.notes.forEach(function (n) { html += "<p class='muted'>" + esc(TEXT.notes[n] || n) + "</p>"; });
    setResult(out, r, html);
  }

  ["fwd-method", "fwd-concurrency", "fwd-max-tokens", "fwd-model", "fwd-extrapolate"].forEach(function (id) {
    $(id).addEventListener("input", updateForward);
    $(id).addEventListener("change", updateForward);
  });
  document.querySelectorAll("#inverse-form input, #inverse-form select").forEach(function (el) {
    el.addEventListener("input", updateInverse);
    el.addEventListener("change", updateInverse);
  });
  updateForward();
  updateInverse();
  window.scmCalculator = { predict: predict, solve: solve };
})();
