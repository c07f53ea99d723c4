/* The live calculator: forward and inverse from the calibration embedded in this page.
 *
 * It repeats, step for step and in the same order of operations, the arithmetic of
 * `scm-xl predict` (scm_xl.model.predict, scm_xl.lsq.LsqFit.forecast,
 * scm_xl.latency.ModelFit.forecast, the method choice of scm_xl.methods.choose_method) and of
 * `scm-xl solve --method chain|lsq|latency` (scm_xl.constrained.solve), so both agree to rounding.
 * Chain and least squares answer at another prompt length through K_in(P): a measured level's
 * K_in, log-log between two (Calibration.k_in_at, the fit's K_in columns blended as
 * LsqFit.forecast blends them), nothing outside the measured levels.
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
  DATA.latency.fits.forEach(function (fit) { KEYS[fit.model] = fit.key; });
  function keyOf(model) {
    return Object.prototype.hasOwnProperty.call(KEYS, model) ? KEYS[model] : model.toLowerCase();
  }
  function numText(v) { return String(v); }
  function fLabel(c) { return "f(" + numText(c) + ")"; }
  function kLabel(l) { return "K_len(" + numText(l) + ")"; }
  function cLabel(m) { return "C_model(" + m + ")"; }
  function pLabel(p) { return "K_in(" + numText(p) + ")"; }

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
  // scm_xl.model.interpolate_k_in: a level's own K_in, ln K_in linear in ln P between the nearest
  // known levels below and above, null outside them.
  function interpolateKIn(prompt, levels) {
    var known = levels.filter(function (p) { return p[1] !== null && p[1] > 0; });
    var low = null, high = null, kLow = null, kHigh = null;
    known.forEach(function (p) {
      if (p[0] <= prompt && (low === null || p[0] > low)) { low = p[0]; kLow = p[1]; }
      if (p[0] >= prompt && (high === null || p[0] < high)) { high = p[0]; kHigh = p[1]; }
    });
    if (low === null || high === null) return null;
    if (low === high) return kLow;
    return Math.exp(Math.log(kLow) + (Math.log(prompt) - Math.log(low)) / (Math.log(high) - Math.log(low))
                    * (Math.log(kHigh) - Math.log(kLow)));
  }
  // Calibration.k_in_at: 1 when no prompt length is given (the base level).
  function kInAt(cal, prompt) { return prompt === null ? 1.0 : interpolateKIn(prompt, cal.k_in || []); }

  // scm_xl.model.predict: measured concurrency levels only, K_in(P) interpolated.
  function chainPredict(c, maxTokens, model, prompt) {
    var cal = DATA.chain;
    model = model || cal.base_model || "";
    var f = levelValue(cal.f, c), k = levelValue(cal.k_len, maxTokens), cm = modelValue(cal, model);
    var kIn = kInAt(cal, prompt);
    var missing = [];
    if (f === null) missing.push(fLabel(c));
    if (k === null) missing.push(kLabel(maxTokens));
    if (cm === null) missing.push(cLabel(model));
    if (kIn === null) missing.push(pLabel(prompt || 0));
    if (missing.length || cal.base_tps === null) return { tps: null, missing: missing };
    return { tps: cal.base_tps * f * k * kIn / cm, missing: [] };
  }

  // constrained.chain_surface's forecast: log-log interpolation between known levels, at K_in(P).
  function chainForecast(c, maxTokens, model, extrapolate, prompt) {
    var cal = DATA.chain;
    var known = cal.f.filter(function (p) { return p[1] !== null; }).map(function (p) { return p[0]; });
    var blend = concurrencyBlend(c, known, extrapolate);
    var k = levelValue(cal.k_len, maxTokens), cm = modelValue(cal, model), kIn = kInAt(cal, prompt);
    if (blend === null || k === null || cm === null || cal.base_tps === null || kIn === null) return { tps: null };
    var logF = 0;
    blend.weights.forEach(function (w) { logF += w[1] * Math.log(levelValue(cal.f, w[0])); });
    return { tps: cal.base_tps * Math.exp(logF) * k * kIn / cm, mean_interval: null, prediction_interval: null,
             interpolated: blend.interpolated, extrapolated: blend.extrapolated };
  }

  // ---------------------------------------------------------------- least squares
  function lsqVector(blend, maxTokens, model, prompt) {
    var L = DATA.lsq;
    var size = 1 + L.concurrency.length + L.max_tokens.length + L.model_keys.length + (L.prompt_levels || []).length;
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
    offset += L.model_keys.length;
    var promptWeights = prompt !== null ? prompt.weights : [];
    for (var p = 0; p < promptWeights.length; p++) {
      var pl = promptWeights[p][0];
      if (pl !== L.base_prompt_level) {
        var pi = L.prompt_levels.indexOf(pl);
        if (pi < 0) return null;
        x[offset + pi] += promptWeights[p][1];
      }
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

  // scm_xl.lsq.LsqFit.forecast (promptTokens null: the base prompt level; between two fitted prompt
  // levels the K_in columns are blended in log-log, outside them there is no prediction)
  function lsqForecast(c, maxTokens, model, extrapolate, promptTokens) {
    if (promptTokens === undefined) promptTokens = null;
    var L = DATA.lsq, cal = L.calibration;
    model = model || cal.base_model || "";
    if (!L.available) return { tps: null, missing: ["no data"], interpolated: false, extrapolated: false };
    var levels = L.measured_concurrency;
    var blend = concurrencyBlend(c, levels, extrapolate);
    if (blend === null) {
      var reason = levels.length ? fLabel(c) + " is outside the measured range" : fLabel(c);
      return { tps: null, missing: [reason], interpolated: false, extrapolated: false };
    }
    var prompt = null;
    if (promptTokens !== null) {
      var measured = L.measured_prompt_levels || [];
      prompt = concurrencyBlend(promptTokens, measured, false);
      if (prompt === null) {
        var why = measured.length ? pLabel(promptTokens) + " is outside the measured prompt levels" : pLabel(promptTokens);
        return { tps: null, missing: [why], interpolated: false, extrapolated: false };
      }
    }
    var x = lsqVector(blend, maxTokens, model, prompt);
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
             interpolated: blend.interpolated || (prompt !== null && prompt.interpolated), extrapolated: blend.extrapolated };
  }


  // ---------------------------------------------------------------- the latency model
  var LAT = DATA.latency;

  // Python's format(x, "g"): six significant digits, trailing zeros dropped.
  function pyG(x) {
    if (x === 0) return Object.is(x, -0) ? "-0" : "0";
    if (!isFinite(x)) return x > 0 ? "inf" : (x < 0 ? "-inf" : "nan");
    var sci = x.toExponential(5), exp = Number(sci.split("e")[1]);
    function strip(t) { return t.indexOf(".") >= 0 ? t.replace(/0+$/, "").replace(/\.$/, "") : t; }
    if (exp < -4 || exp >= 6) {
      var parts = sci.split("e"), e = parts[1], sign = e.charAt(0) === "-" ? "-" : "+";
      var digits = e.replace(/^[+-]/, "");
      if (digits.length < 2) digits = "0" + digits;
      return strip(parts[0]) + "e" + sign + digits;
    }
    return strip(x.toFixed(5 - exp));
  }

  // scm_xl.methods.other_prompt_level
  function otherPromptLevel(prompt, base) {
    if (prompt === null || base === null) return false;
    return !(base / LAT.prompt_ratio <= prompt && prompt <= base * LAT.prompt_ratio);
  }

  // scm_xl.methods.choose_method("auto", ...): the lowest hold-out error (decided when the page was
  // made: it does not depend on the prompt length), except that where the data have no prompt
  // levels a prompt length other than the rows' is the latency model's (K_in is not identified).
  function autoChoice(prompt) {
    if (!DATA.has_prompt_levels && otherPromptLevel(prompt, LAT.base_prompt)) {
      if (LAT.available) {
        return { method: "latency", why: TEXT.why_other_prompt.replace("{p}", pyG(prompt))
          .replace("{base}", pyG(LAT.base_prompt)) };
      }
      return { method: "chain", why: TEXT.why_no_latency };
    }
    return { method: LAT.auto.method, why: LAT.auto.why };
  }

  function latencyFit(model) {  // LatencyModel.fit_for
    if (!LAT.fits.length) return null;
    if (model === null || model === undefined) return LAT.fits[0];
    var key = keyOf(model);
    for (var i = 0; i < LAT.fits.length; i++) if (LAT.fits[i].key === key) return LAT.fits[i];
    return null;
  }
  function linear(beta, features) {  // LinearFit.value
    var s = 0;
    for (var i = 0; i < beta.length && i < features.length; i++) s += beta[i] * features[i];
    return s;
  }
  // scm_xl.latency.Terms.weights: n as a blend of the knots (the measured served batches,
  // ascending), linear between the two around it and along the nearest end segment outside them;
  // one knot: that knot.
  function knotWeights(knots, n) {
    var out = knots.map(function () { return 0.0; });
    if (knots.length === 1) { out[0] = 1.0; return out; }
    var upper = knots.length - 1;
    for (var i = 0; i < knots.length; i++) if (knots[i] >= n) { upper = i; break; }
    upper = Math.min(Math.max(upper, 1), knots.length - 1);
    var low = knots[upper - 1], high = knots[upper];
    var w = (n - low) / (high - low);
    out[upper - 1] = 1.0 - w;
    out[upper] = w;
    return out;
  }
  // Terms.itl and Terms.ttft: the features in the fit's order (step(knot) per knot, then d, e;
  // t0, s, b, p, q), a term whose factor was never varied left out as the fit left it out.
  function itlFeatures(terms, n, prompt, output) {
    var features = knotWeights(terms.knots, n);
    if (terms.context) features.push(n * (prompt + output / 2));
    if (terms.joining) features.push(n * prompt / output);
    return features;
  }
  function ttftFeatures(terms, n, prompt, step) {
    var features = [1.0];
    if (terms.batch) features.push(step);
    if (terms.busy) features.push(step * Math.min(1, Math.max(0, n - 1)));  // latency.busy_share
    if (terms.prompt) {
      features.push(prompt);
      if (terms.batch) features.push(n * prompt);
    }
    return features;
  }
  function fitted(features, beta, part) {  // the page's terms are the fit's (a stale payload says so)
    if (features.length !== beta.length) throw new Error(part + ": " + features.length + " features, " + beta.length + " coefficients");
    return features;
  }
  function served(fit, c) { return fit.knee_limit !== null ? Math.min(c, fit.knee_limit) : c; }

  function emptyForecast(prompt, missing) {
    return { tps: null, ttft_s: null, latency_s: null, itl_s: null, ttft_p95_s: null, latency_p95_s: null,
             tps_interval: null, beyond_knee: false, extrapolated: [], missing: missing, prompt_tokens: prompt };
  }

  // scm_xl.latency.ModelFit.forecast (output_tokens: max_tokens times the measured share)
  function fitForecast(fit, c, maxTokens, promptTokens) {
    var prompt = promptTokens === null ? fit.prompt_levels[0] : promptTokens;
    var output = Math.max(1.0, maxTokens * fit.output_ratio);
    var missing = [];
    if (!fit.terms.prompt && !fit.prompt_levels.some(function (level) {
      return Math.abs(prompt - level) <= level * (LAT.prompt_ratio - 1) + 1;
    })) missing.push(fit.missing_prompt);
    if (!fit.terms.batch && c !== fit.concurrency_range[0]) missing.push(fit.missing_concurrency);
    if (missing.length) return emptyForecast(prompt, missing);
    var n = served(fit, c);
    var itl = linear(fit.itl_beta, fitted(itlFeatures(fit.terms, n, prompt, output), fit.itl_beta, "ITL"));
    var ttft = linear(fit.ttft_beta, fitted(ttftFeatures(fit.terms, n, prompt, itl), fit.ttft_beta, "TTFT"));
    var latency = ttft + (output - 1) * itl;
    if (!(ttft > 0 && itl > 0 && latency > 0)) return emptyForecast(prompt, ["the fitted times are not positive there"]);
    var factor = 1.0;
    if (fit.knee_limit !== null && c > fit.knee_limit) factor = c / fit.knee_limit;
    var wait = fit.queue_share * latency * (factor - 1);
    var latencyTotal = latency + wait, ttftTotal = ttft + wait;
    var tps = fit.efficiency * served(fit, c) * output / latency;
    var interval = null;
    if (fit.sigma_log !== null && fit.dof > 0) {
      var spread = fit.t * fit.sigma_log * Math.sqrt(1 + 1 / fit.rows);
      interval = [tps * Math.exp(-spread), tps * Math.exp(spread)];
    }
    var outside = [];
    if (!(fit.concurrency_range[0] <= c && c <= fit.concurrency_range[1])) outside.push("concurrency");
    var levels = fit.prompt_levels;
    if (fit.terms.prompt && !(levels[0] / LAT.prompt_ratio <= prompt && prompt <= levels[levels.length - 1] * LAT.prompt_ratio))
      outside.push("prompt length");
    if (!(fit.max_tokens_range[0] <= maxTokens && maxTokens <= fit.max_tokens_range[1])) outside.push("max_tokens");
    return {
      tps: tps, ttft_s: ttftTotal, latency_s: latencyTotal, itl_s: itl,
      ttft_p95_s: fit.ttft_p95_ratio ? ttftTotal * fit.ttft_p95_ratio : null,
      latency_p95_s: fit.latency_p95_ratio ? latencyTotal * fit.latency_p95_ratio : null,
      tps_interval: interval, beyond_knee: factor > 1, extrapolated: outside, missing: [], prompt_tokens: prompt
    };
  }

  // `scm-xl predict --method latency --json`: LatencyModel.forecast and the knee of the model's fit
  function latencyPredict(c, maxTokens, model, promptTokens) {
    var fit = latencyFit(model);
    var r;
    if (fit === null) {
      var reason = LAT.fits.length ? "the latency model has no fit for '" + (model || "") + "'" : LAT.no_fit;
      r = emptyForecast(promptTokens === null ? 0.0 : promptTokens, [reason]);
    } else {
      r = fitForecast(fit, c, maxTokens, promptTokens);
    }
    r.method = "latency";
    r.knee = fit ? fit.knee : null;
    return r;
  }

  // `scm-xl predict --json` (promptTokens: null when not given)
  function predict(method, c, maxTokens, model, extrapolate, promptTokens) {
    if (promptTokens === undefined) promptTokens = null;
    if (method === "auto") method = autoChoice(promptTokens).method;
    if (method === "latency") {
      return latencyPredict(c, maxTokens, model || DATA.chain.base_model || null, promptTokens);
    }
    if (!DATA.has_prompt_levels && otherPromptLevel(promptTokens, LAT.base_prompt)) {
      return { tps: null, method: method, missing: ["prompt length " + pyG(promptTokens) + ": the data have one prompt ("
        + pyG(LAT.base_prompt) + " tokens) and no prompt levels (collect --prompt-tokens), so K_in is not identified; "
        + "use --method latency"] };
    }
    // without prompt levels every row has the one recorded prompt: a length within 5% of it is that
    // prompt (an unrecorded prompt proves nothing: K_in stays unidentified)
    if (!DATA.has_prompt_levels && LAT.base_prompt !== null && LAT.base_prompt !== undefined) promptTokens = null;
    if (method === "chain") {
      var p = chainPredict(c, maxTokens, model, promptTokens);
      return { tps: p.tps, missing: p.missing, method: "chain" };
    }
    var f = lsqForecast(c, maxTokens, model, extrapolate, promptTokens);
    return { tps: f.tps, missing: f.missing, method: "lsq", tps_interval: f.mean_interval || null,
             tps_prediction_interval: f.prediction_interval || null,
             interpolated: f.interpolated, extrapolated: f.extrapolated };
  }

  // ---------------------------------------------------------------- the constrained inverse
  // constrained.latency_surface: the latency model at the workload's prompt length, continuous in
  // concurrency, with predicted P95s (solve asks it with extrapolation on and rejects after).
  function latencySurface(prompt) {
    var levels = [], lengths = [], top = 0;
    LAT.fits.forEach(function (fit) {
      fit.measured_concurrency.forEach(function (c) { if (levels.indexOf(c) < 0) levels.push(c); });
      fit.max_tokens_levels.forEach(function (l) { if (lengths.indexOf(l) < 0) lengths.push(l); });
      top = Math.max(top, fit.concurrency_range[1]);
    });
    function ascending(a, b) { return a - b; }
    var knees = LAT.fits.filter(function (fit) { return fit.knee_limit !== null; })
      .map(function (fit) { return fit.knee_limit; });
    return {
      knee: knees.length ? Math.min.apply(null, knees) : null,
      method: "latency", predicts_percentiles: true, onsets: DATA.onsets_all, cells: [],
      forecast: function (c, l, m) {
        var r = latencyPredict(c, l, m, prompt);
        if (r.tps === null) return { tps: null };
        var fit = latencyFit(m), low = fit.concurrency_range[0], high = fit.concurrency_range[1];
        var outside = !(low <= c && c <= high);
        var measured = fit.measured_concurrency.indexOf(c) >= 0;
        return { tps: r.tps, mean_interval: null, prediction_interval: r.tps_interval,
                 interpolated: !measured && !outside, extrapolated: outside,
                 latency_p95_s: r.latency_p95_s, ttft_p95_s: r.ttft_p95_s };
      },
      concurrency_levels: levels.length ? levels.sort(ascending) : [top],
      max_tokens_levels: lengths.sort(ascending),
      models: LAT.fits.map(function (fit) { return [fit.model, fit.key, 1.0]; })
    };
  }

  // constrained.solve_request: chain and lsq are judged on the measured percentiles and 429s of the
  // rows at the asked prompt level (the base one when none is asked; none at another length).
  function measuredAt(prompt) {
    if (prompt === null) return { cells: DATA.cells, onsets: DATA.onsets };
    for (var i = 0; i < DATA.prompt_cells.length; i++) {
      if (DATA.prompt_cells[i][0] === prompt) return { cells: DATA.prompt_cells[i][1], onsets: DATA.prompt_cells[i][2] };
    }
    return { cells: [], onsets: {} };
  }

  function surface(method, prompt) {
    if (prompt === undefined) prompt = null;
    if (method === "latency") return latencySurface(prompt);
    var measured = measuredAt(prompt);
    var cal = method === "lsq" ? DATA.lsq.calibration : DATA.chain;
    var levels = method === "lsq" ? DATA.lsq.measured_concurrency
      : DATA.chain.f.filter(function (p) { return p[1] !== null; }).map(function (p) { return p[0]; });
    return {
      method: method,
      forecast: method === "lsq" ? function (c, l, m) { return lsqForecast(c, l, m, true, prompt); }
        : function (c, l, m) { return chainForecast(c, l, m, true, prompt); },
      concurrency_levels: levels,
      max_tokens_levels: cal.k_len.filter(function (p) { return p[1] !== null; }).map(function (p) { return p[0]; }),
      models: cal.c_model.filter(function (m) { return m[2] !== null; }),
      predicts_percentiles: false, onsets: measured.onsets, cells: measured.cells, knee: null
    };
  }

  function cellOf(cells, key, c, l) {
    for (var i = 0; i < cells.length; i++) {
      var cell = cells[i];
      if (cell[0] === key && cell[1] === c && cell[2] === l) return { latency: cell[3], ttft: cell[4] };
    }
    return null;
  }

  function rejections(model, key, c, l, forecast, cell, cons, extrapolate, onsets) {
    var reasons = [];
    if (cons.models !== null && cons.models.indexOf(key) < 0) reasons.push("model");
    if (cons.max_tokens !== null && cons.max_tokens.indexOf(l) < 0) reasons.push("max_tokens");
    if (cons.max_concurrency !== null && c > cons.max_concurrency) reasons.push("max_concurrency");
    var onset = cons.rate_limit !== null ? cons.rate_limit
      : (Object.prototype.hasOwnProperty.call(onsets, key) ? onsets[key] : null);
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

  // scm_xl.constrained.solve, answered as `scm-xl solve --method M --json` prints it. measuredOnly:
  // only the measured concurrency levels are candidates, as the workbook's inverse and plain
  // `scm-xl solve` (scm_xl.model.solve) take them: with the chain, one max_tokens and one model,
  // the smallest measured level that meets the target, and the best of them.
  function solve(method, target, cons, extrapolate, conservative, promptTokens, measuredOnly) {
    if (promptTokens === undefined) promptTokens = null;
    if (method === "auto") method = autoChoice(promptTokens).method;
    // without prompt levels every row has the one prompt (constrained.solve_request)
    var recorded = LAT.base_prompt !== null && LAT.base_prompt !== undefined;
    var s = surface(method, method !== "latency" && !DATA.has_prompt_levels && recorded ? null : promptTokens);
    var top = s.concurrency_levels.length ? Math.max.apply(null, s.concurrency_levels) : 0;
    var cap = Math.max(DATA.search_factor * top, cons.max_concurrency || 0);
    var notes = [];
    var candidates = [];
    var levels = [];
    if (measuredOnly) {
      s.concurrency_levels.forEach(function (c) { if (levels.indexOf(c) < 0) levels.push(c); });
      levels.sort(function (a, b) { return a - b; });
    } else {
      for (var k = 1; k <= cap; k++) levels.push(k);
    }
    s.models.forEach(function (m) {
      s.max_tokens_levels.forEach(function (l) {
        for (var ci = 0; ci < levels.length; ci++) {
          var c = levels[ci];
          var f = s.forecast(c, l, m[0]);
          if (f.tps === null) continue;
          var cell = s.predicts_percentiles ? { latency: f.latency_p95_s, ttft: f.ttft_p95_s } : cellOf(s.cells, m[1], c, l);
          candidates.push({
            model: m[0], key: m[1], concurrency: c, max_tokens: l, c_model: m[2], tps: f.tps,
            mean_interval: f.mean_interval || null, prediction_interval: f.prediction_interval || null,
            interpolated: f.interpolated, extrapolated: f.extrapolated,
            latency_p95_s: cell ? cell.latency : null, ttft_p95_s: cell ? cell.ttft : null,
            rejected_by: rejections(m[0], m[1], c, l, f, cell, cons, extrapolate, s.onsets)
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
    if (cheapest && cheapest.interpolated) notes.push(method === "latency" ? "interpolated_latency" : "interpolated");
    if (cheapest && cheapest.extrapolated) notes.push("extrapolated");
    if (blocked && blocked.rejected_by.indexOf("extrapolation") >= 0) notes.push("needs_extrapolation");
    if (candidates.some(function (c) {
      return c.rejected_by.indexOf("latency_p95_unmeasured") >= 0 || c.rejected_by.indexOf("ttft_p95_unmeasured") >= 0;
    })) notes.push("unmeasured");
    if (s.knee !== null && ((cheapest && cheapest.concurrency > s.knee) || (best && best.concurrency > s.knee)))
      notes.push("beyond_knee");
    return {
      concurrency: cheapest ? cheapest.concurrency : null, tps: cheapest ? cheapest.tps : null,
      reachable: cheapest !== null, max_tokens: cheapest ? cheapest.max_tokens : null,
      model: cheapest ? cheapest.model : null, method: method, target_tps: target,
      cheapest: cheapest ? candidateDict(cheapest) : null, binding: binding,
      blocked: blocked ? candidateDict(blocked) : null, best: best ? candidateDict(best) : null,
      best_binding: bestBlocked ? bestBlocked.rejected_by.slice() : [], notes: notes, knee: s.knee
    };
  }

  // ---------------------------------------------------------------- the page
  function $(id) { return document.getElementById(id); }
  // A value the data do not give reads "n/a" (zh "无"), never "-", which reads as a minus sign.
  function fmt(v, digits) { return v === null || v === undefined ? TEXT.missing : v.toFixed(digits === undefined ? 2 : digits); }
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
    return codes.length ? codes.map(function (c) { return TEXT.binding[c] || c; }).join(", ") : TEXT.missing;
  }
  // A configuration that was measured and excluded: the answer there is the model's, not the
  // measurement (report.excluded_here); only at the base prompt level, where the rows are.
  function excludedHtml(model, c, l, prompt) {
    if (prompt !== null && prompt !== undefined) return "";
    var key = keyOf(model), html = "";
    DATA.excluded.forEach(function (e) {
      if (e[0] === key && e[1] === c && e[2] === l) {
        html += "<p class='warn excluded-here' data-exp-id='" + esc(e[4]) + "'>" + esc(TEXT.excluded_here
          .replace("{row}", e[4]).replace("{m}", fmt(e[3])).replace("{why}", e[5])) + "</p>";
      }
    });
    return html;
  }
  function config(c) {
    return esc(TEXT.config.replace("{c}", c.concurrency).replace("{l}", c.max_tokens).replace("{m}", c.model));
  }

  function nothingCalibrated(out) {
    if (out.closest("form").getAttribute("data-calibrated") === "1") return false;
    setResult(out, { error: "no_calibration" }, "<p class='warn'>" + esc(TEXT.no_calibration) + "</p>");
    return true;
  }

  function methodName(m) { return TEXT.method_names[m] || m; }
  function seconds(v) { return v === null || v === undefined ? TEXT.missing : pyG(Number(v.toPrecision(3))) + " s"; }

  // Which method answers and why, as `scm-xl predict` says it.
  function choiceFor(method, prompt) {
    if (method === "auto") return autoChoice(prompt);
    return { method: method, why: TEXT.why_asked };
  }
  function showChoice(el, choice) {
    el.setAttribute("data-method", choice.method);
    el.setAttribute("data-why", choice.why);
    el.textContent = TEXT.method_label + ": " + methodName(choice.method) + " (" + choice.why + ")";
  }

  function latencyHtml(r) {
    var html = "<p class='answer'><span class='big'>" + fmt(r.tps) + "</span> TPS</p>";
    if (r.tps_interval) html += "<p>" + esc(TEXT.prediction90) + ": " + fmt(r.tps_interval[0]) + " – " + fmt(r.tps_interval[1]) + "</p>";
    html += "<p>" + esc(TEXT.ttft_label) + " " + seconds(r.ttft_s) + " · " + esc(TEXT.latency_label) + " " + seconds(r.latency_s)
      + " · " + esc(TEXT.itl_label) + " " + seconds(r.itl_s) + " — " + esc(TEXT.at_prompt.replace("{p}", pyG(r.prompt_tokens))) + "</p>";
    if (r.ttft_p95_s !== null || r.latency_p95_s !== null) {
      html += "<p class='muted'>" + esc(TEXT.p95_label) + ": " + esc(TEXT.ttft_label) + " " + seconds(r.ttft_p95_s) + " · "
        + esc(TEXT.latency_label) + " " + seconds(r.latency_p95_s) + "</p>";
    }
    var fit = latencyFit($("fwd-model").value);
    if (fit) html += "<p class='muted'>" + esc(TEXT.knee_label) + ": " + esc(fit.knee_words || fit.knee.text) + "</p>";
    if (r.beyond_knee) html += "<p class='warn'>" + esc(TEXT.beyond_knee) + "</p>";
    if (r.extrapolated.length) html += "<p class='warn'>" + esc(TEXT.outside.replace("{what}", r.extrapolated.join(", "))) + "</p>";
    return html;
  }

  function updateForward() {
    var out = $("forward-result");
    if (nothingCalibrated(out)) return;
    var method = $("fwd-method").value, c = Number($("fwd-concurrency").value);
    var l = Number($("fwd-max-tokens").value), model = $("fwd-model").value, extrapolate = $("fwd-extrapolate").checked;
    var prompt = optionalNumber($("fwd-prompt-tokens"));
    if (!(c > 0) || !(l >= 1) || !Number.isInteger(l) || (prompt !== null && !(prompt >= 0))) {
      setResult(out, { error: "input" }, "<p class='warn'>" + esc(TEXT.bad_input) + "</p>");
      return;
    }
    var choice = choiceFor(method, prompt);
    showChoice($("forward-choice"), choice);
    var r = predict(method, c, l, model, extrapolate, prompt);
    if (r.tps === null) {
      setResult(out, r, "<p class='answer muted'>" + esc(TEXT.unidentified) + ": " + esc(r.missing.join(", ")) + "</p>");
      return;
    }
    if (r.method === "latency") {
      setResult(out, r, latencyHtml(r) + attainmentHtml(model || DATA.chain.base_model || "", c, l, prompt));
      return;
    }
    var html = "<p class='answer'><span class='big'>" + fmt(r.tps) + "</span> TPS</p>";
    if (r.tps_interval) html += "<p>" + esc(TEXT.interval90) + ": " + fmt(r.tps_interval[0]) + " – " + fmt(r.tps_interval[1]) + "</p>";
    if (r.tps_prediction_interval) html += "<p class='muted'>" + esc(TEXT.prediction90) + ": " + fmt(r.tps_prediction_interval[0]) + " – " + fmt(r.tps_prediction_interval[1]) + "</p>";
    if (r.method === "chain") html += "<p class='muted'>" + esc(TEXT.chain_no_interval) + "</p>";
    if (r.interpolated) html += "<p class='muted'>" + esc(TEXT.note_interpolated) + "</p>";
    if (r.extrapolated) html += "<p class='warn'>" + esc(TEXT.note_extrapolated) + "</p>";
    html += excludedHtml(model || DATA.chain.base_model || "", c, l, prompt);
    html += attainmentHtml(model || DATA.chain.base_model || "", c, l, prompt);
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
    var prompt = optionalNumber($("inv-prompt-tokens"));
    if (prompt !== null && !(prompt >= 0)) {
      setResult(out, { error: "input" }, "<p class='warn'>" + esc(TEXT.bad_input) + "</p>");
      return;
    }
    var choice = choiceFor(method, prompt);
    showChoice($("inverse-choice"), choice);
    var r = solve(method, target, cons, $("inv-extrapolate").checked, $("inv-conservative").checked, prompt,
                  !$("inv-search").checked);
    var html;
    if (r.cheapest) {
      var iv = r.cheapest.tps_interval, pv = r.cheapest.tps_prediction_interval;
      html = "<p class='answer'>" + config(r.cheapest) + ": <span class='big'>" + fmt(r.cheapest.tps) + "</span> TPS</p>"
        + (iv ? "<p>" + esc(TEXT.interval90) + ": " + fmt(iv[0]) + " – " + fmt(iv[1]) + "</p>"
           : (pv ? "<p>" + esc(TEXT.prediction90) + ": " + fmt(pv[0]) + " – " + fmt(pv[1]) + "</p>" : ""));
      html += excludedHtml(r.cheapest.model, r.cheapest.concurrency, r.cheapest.max_tokens, prompt);
      html += attainmentHtml(r.cheapest.model, r.cheapest.concurrency, r.cheapest.max_tokens, prompt);
      if (r.method === "latency" && (r.cheapest.latency_p95_s !== null || r.cheapest.ttft_p95_s !== null)) {
        html += "<p class='muted'>" + esc(TEXT.p95_label) + ": " + esc(TEXT.ttft_label) + " " + seconds(r.cheapest.ttft_p95_s)
          + " · " + esc(TEXT.latency_label) + " " + seconds(r.cheapest.latency_p95_s) + "</p>";
      }
    } else {
      html = "<p class='answer warn'>" + esc(TEXT.unreachable.replace("{t}", String(target))) + "</p>";
    }
    html += "<p>" + esc(TEXT.binding_label) + ": <b>" + esc(bindingText(r.binding)) + "</b></p>";
    if (r.best) {
      // "(bound by …)" only when something stops a higher TPS: the best may be the highest there is
      html += "<p>" + esc(TEXT.best_label) + ": " + fmt(r.best.tps) + " TPS — " + config(r.best)
        + (r.best_binding.length ? " (" + esc(TEXT.bound_by) + " " + esc(bindingText(r.best_binding)) + ")" : "") + "</p>";
      html += excludedHtml(r.best.model, r.best.concurrency, r.best.max_tokens, prompt);
    }
    r.notes.forEach(function (n) {
      html += "<p class='muted'>" + esc((TEXT.notes[n] || n).replace("{k}", r.knee === null ? "" : pyG(r.knee))) + "</p>";
    });
    if (r.method !== "latency" && prompt !== null && !DATA.has_prompt_levels) {
      html += "<p class='warn'>" + esc(TEXT.notes.no_prompt_levels) + "</p>";
    }
    var result = {};
    Object.keys(r).forEach(function (k) { if (k !== "knee") result[k] = r[k]; });
    setResult(out, result, html);
  }

  // ---------------------------------------------------------------------------
  // Under an SLO: the per-configuration tallies are goodput.py's (computed in Python); the plan
  // repeats capacity.plan (replicas_for, Pricing.per_million_output, option, _order) on them.
  // ---------------------------------------------------------------------------
  var SLO = DATA.slo || null;
  var ST = TEXT.slo;
  function pct(v) { return (100 * v).toFixed(1) + "%"; }
  function sloCell(model, c, l, prompt) {  // the measured cell at the base prompt level
    if (!SLO || (prompt !== null && prompt !== undefined)) return null;
    var key = keyOf(model);
    return SLO.cells.filter(function (x) {
      return x.key === key && x.concurrency === c && x.max_tokens === l && x.planned;
    })[0] || null;
  }
  function attainmentHtml(model, c, l, prompt) {
    if (!SLO || (prompt !== null && prompt !== undefined)) return "";
    var x = sloCell(model, c, l, prompt);
    if (!x) return "<p class='muted slo-here' data-measured='0'>" + esc(ST.not_measured_here.replace("{slo}", SLO.slo)) + "</p>";
    return "<p class='slo-here' data-measured='1' data-attainment='" + x.attainment + "'>" + esc(ST.attainment_here
      .replace("{slo}", SLO.slo).replace("{a}", pct(x.attainment)).replace("{conf}", SLO.confidence)
      .replace("{lo}", pct(x.interval[0])).replace("{hi}", pct(x.interval[1])).replace("{good}", x.good)
      .replace("{n}", x.requests).replace("{g}", fmt(x.goodput_tps))) + "</p>";
  }
  function replicasFor(target, per) {  // capacity.replicas_for
    var count = Math.ceil(target / per);
    if (count > 1 && (count - 1) * per >= target * (1 - 1e-12)) count -= 1;
    return count;
  }
  function sloOption(x, target, pricing, limits) {  // capacity.option
    var replicas = replicasFor(target, x.tps);
    var prompt = x.mean_prompt_tokens;
    var ipo = prompt === null || x.mean_output_tokens <= 0 ? null : prompt / x.mean_output_tokens;
    var perMillion = null, perHour = null;
    if (pricing && pricing.mode === "tokens") perMillion = ipo === null ? null : pricing.price_in * ipo + pricing.price_out;
    else if (pricing) perMillion = pricing.gpus * pricing.gpu_hour_price / (x.tps * 3600.0) * 1e6;
    if (pricing && pricing.mode === "gpu") perHour = replicas * pricing.gpus * pricing.gpu_hour_price;
    else if (perMillion !== null) perHour = target * 3600.0 / 1e6 * perMillion;
    var rpm = null, tpm = null, latency = x.mean_latency_s;
    if (latency !== null && latency > 0) {
      rpm = replicas * SLO.window_s * x.concurrency / latency;
      tpm = prompt === null ? null : rpm * (prompt + x.mean_output_tokens);
    }
    var reasons = x.rejected_by.slice();
    if (pricing && perMillion === null) reasons.push("cost_unknown");
    if (limits) {
      if (limits.rpm !== null && (rpm === null || rpm > limits.headroom * limits.rpm)) reasons.push("rpm_limit");
      if (limits.tpm !== null) {
        if (tpm === null) reasons.push("tpm_unmeasured");
        else if (tpm > limits.headroom * limits.tpm) reasons.push("tpm_limit");
      }
    }
    return { cell: x, replicas: replicas, capacity_tps: replicas * x.tps, input_per_output: ipo,
             cost_per_million_output: perMillion, cost_per_hour: perHour, rpm: rpm, tpm: tpm, rejected_by: reasons };
  }
  function sloKey(o, minimise) {  // capacity._order, as a tuple
    var slots = [o.replicas, o.cell.concurrency, o.cell.max_tokens, o.cell.key];
    if (minimise !== "cost") return slots;
    return [o.cost_per_hour === null ? Infinity : o.cost_per_hour,
            o.cost_per_million_output === null ? Infinity : o.cost_per_million_output].concat(slots);
  }
  function tupleCompare(a, b) {
    for (var i = 0; i < a.length; i++) { if (a[i] < b[i]) return -1; if (a[i] > b[i]) return 1; }
    return 0;
  }
  function sloPlan(target, pricing, limits, minimise) {  // capacity.plan
    var cells = SLO.cells.filter(function (x) { return x.planned && x.tps > 0; });
    function sorted(lim) {
      return cells.map(function (x) { return sloOption(x, target, pricing, lim); })
        .sort(function (a, b) { return tupleCompare(sloKey(a, minimise), sloKey(b, minimise)); });
    }
    var options = sorted(limits), unconstrained = sorted(null);
    var ok = function (o) { return !o.rejected_by.length; };
    var chosen = options.filter(ok)[0] || null, unlimited = unconstrained.filter(ok)[0] || null;
    var before = options.filter(function (o) {
      return o.rejected_by.length && (chosen === null || tupleCompare(sloKey(o, minimise), sloKey(chosen, minimise)) < 0);
    });
    var binding = before.length ? before[0].rejected_by : [];
    var limitBound = unlimited !== null && (chosen === null
      || tupleCompare(sloKey(chosen, minimise), sloKey(unlimited, minimise)) !== 0);
    if (limitBound) {
      var shown = options.filter(function (o) { return tupleCompare(sloKey(o, minimise), sloKey(unlimited, minimise)) === 0; })[0];
      var limited = shown.rejected_by.filter(function (r) { return ["rpm_limit", "tpm_limit", "tpm_unmeasured"].indexOf(r) >= 0; });
      if (limited.length) binding = limited;
    }
    return { chosen: chosen, bound: limitBound ? "limit-bound" : "server-bound", binding: binding };
  }
  function sloReasons(codes) {  // in the page's language (texts.py: slo_texts.REASONS), the payload's English else
    return codes.map(function (c) { return ST.reasons[c] || SLO.reason_words[c] || c; }).join(ST.reasons_sep);
  }
  function updateSlo() {
    var out = $("slo-result");
    if (!out || !SLO) return;
    if (SLO.plan_error) { setResult(out, { error: "plan" }, "<p class='warn'>" + esc(SLO.plan_error) + "</p>"); return; }
    var target = Number($("slo-target").value);
    var v = {};
    ["price-in", "price-out", "gpu-hour-price", "gpus", "rpm", "tpm"].forEach(function (id) { v[id] = optionalNumber($("slo-" + id)); });
    var minimise = $("slo-minimise").value;
    var bad = !(target > 0) || ["price-in", "price-out", "gpu-hour-price"].some(function (k) { return v[k] !== null && !(v[k] >= 0); })
      || (v.gpus !== null && !(Number.isInteger(v.gpus) && v.gpus >= 1))
      || ["rpm", "tpm"].some(function (k) { return v[k] !== null && !(v[k] > 0); });
    if (bad) { setResult(out, { error: "input" }, "<p class='warn'>" + esc(ST.bad_input) + "</p>"); return; }
    var tokens = v["price-in"] !== null || v["price-out"] !== null, gpu = v["gpu-hour-price"] !== null || v.gpus !== null;
    var pricing = null;
    if ((tokens && gpu) || (tokens && (v["price-in"] === null || v["price-out"] === null))
        || (gpu && (v["gpu-hour-price"] === null || v.gpus === null)) || (minimise === "cost" && !tokens && !gpu)) {
      setResult(out, { error: "price" }, "<p class='warn'>" + esc(ST.bad_price) + "</p>");
      return;
    }
    if (tokens) pricing = { mode: "tokens", price_in: v["price-in"], price_out: v["price-out"] };
    if (gpu) pricing = { mode: "gpu", gpu_hour_price: v["gpu-hour-price"], gpus: v.gpus };
    // each limit on its own: typed, else the provider's (slo_answer.slo_answer)
    var rpm = v.rpm !== null ? v.rpm : SLO.provider_rpm, tpm = v.tpm !== null ? v.tpm : SLO.provider_tpm;
    var limits = (rpm || tpm) ? { rpm: rpm || null, tpm: tpm || null, headroom: SLO.headroom } : null;
    var p = sloPlan(target, pricing, limits, minimise);
    var html, data = { bound: p.bound, binding: p.binding, chosen: null };
    if (p.chosen) {
      var o = p.chosen, x = o.cell;
      data.chosen = { model: x.model, concurrency: x.concurrency, max_tokens: x.max_tokens, replicas: o.replicas,
                      attainment: x.attainment, attainment_interval: x.interval, capacity_tps: o.capacity_tps,
                      cost_per_million_output: o.cost_per_million_output, cost_per_hour: o.cost_per_hour,
                      rpm: o.rpm, tpm: o.tpm };
      html = "<p class='answer'>" + esc(ST.plan.replace("{r}", o.replicas).replace("{config}", TEXT.config
        .replace("{c}", x.concurrency).replace("{l}", x.max_tokens).replace("{m}", x.model))
        .replace("{tps}", fmt(x.tps)).replace("{g}", fmt(x.goodput_tps)).replace("{a}", pct(x.attainment))
        .replace("{conf}", SLO.confidence).replace("{lo}", pct(x.interval[0])).replace("{hi}", pct(x.interval[1]))
        .replace("{good}", x.good).replace("{n}", x.requests)) + "</p>";
      if (o.cost_per_million_output !== null) {
        html += "<p class='slo-cost'>" + esc(ST.cost.replace("{m}", fmt(o.cost_per_million_output))
          .replace("{h}", fmt(o.cost_per_hour))) + "</p>";
      }
      if (o.rpm !== null) html += "<p class='muted'>" + esc(ST.traffic.replace("{rpm}", fmt(o.rpm, 0)).replace("{tpm}", fmt(o.tpm, 0))) + "</p>";
    } else {
      html = "<p class='answer warn'>" + esc(ST.none.replace("{t}", String(target)).replace("{slo}", SLO.slo)) + "</p>";
    }
    html += "<p><b>" + esc(ST.bound[p.bound]) + "</b>" + (p.binding.length ? " — " + esc(ST.binding_label) + ST.label_sep
      + esc(sloReasons(p.binding)) : "") + "</p>";
    setResult(out, data, html);
  }
  if (SLO && $("slo-form")) {
    document.querySelectorAll("#slo-form input, #slo-form select").forEach(function (el) {
      el.addEventListener("input", updateSlo);
      el.addEventListener("change", updateSlo);
    });
  }

  ["fwd-method", "fwd-concurrency", "fwd-max-tokens", "fwd-prompt-tokens", "fwd-model", "fwd-extrapolate"].forEach(function (id) {
    $(id).addEventListener("input", updateForward);
    $(id).addEventListener("change", updateForward);
  });
  document.querySelectorAll("#inverse-form input, #inverse-form select").forEach(function (el) {
    el.addEventListener("input", updateInverse);
    el.addEventListener("change", updateInverse);
  });
  updateForward();
  updateInverse();
  updateSlo();
  window.scmCalculator = { predict: predict, solve: solve, autoChoice: autoChoice, weights: knotWeights };
})();
