/* The run page's charts: one Plotly chart per series, drawn from /api/v1/runs/<id>/series/.
 *
 * Each chart shows the bucket's last value as the line, the min–max of each
 * bucket as a light envelope (so a one-step spike is never hidden), the
 * phase-aware band the rules check, non-finite buckets as red crosses along the bottom, phase
 * spans shaded across every chart, restarts as dashed lines and alerts as red
 * markers at the top at their first step. Zooming any chart refetches finer data for all
 * of them and puts the range in the address bar (?metric=&start=&end=), so the view can be
 * shared; charts below the fold are drawn when scrolled into view. An incident's page draws its series with this
 * script too: its data names the incident's alerts only, and a `range` (the incident's steps) the charts open on. "Compare with" draws another run of the
 * project (?compare=<run id>) as a dashed grey line on every chart, its same series at the same steps, from the
 * same chart data (one more request a chart).
 */
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("run-chart-data").textContent);
  const runPath = "/api/v1/runs/" + data.run.split("/").map(encodeURIComponent).join("/") + "/series/";
  const PHASE_COLOURS = { warmup: "#f59e0b", eval: "#6366f1", checkpoint: "#0ea5e9", restart: "#ef4444", data_refresh: "#10b981", cooldown: "#a3a3a3", lr_decay: "#d4d4d4" };
  const charts = [];
  let range = null; // [start, end] shared by every chart, null = the whole run
  let zooming = false;
  let compare = null; // { run, label }: the run drawn beside this one, null = none
  const COMPARE_COLOUR = "#6b7280";

  function num(v) { return v === null || v === "NaN" || v === "Infinity" || v === "-Infinity" ? null : v; }

  function shapes(maxStep) {
    const out = [];
    const shown = range ? range[1] - range[0] : (maxStep || 1);
    const minWidth = shown / 400; // a one-step eval or checkpoint stays visible when zoomed out
    // Phases declared at one step (an eval and a checkpoint after the same step) share that step's height in
    // lanes, each its own colour, so neither hides under the other; the one that carries on is full height after.
    const atStep = {};
    for (const p of data.phases) (atStep[p.start] = atStep[p.start] || []).push(p);
    for (const p of data.phases) {
      const end = p.end === null ? (maxStep === null ? p.start : maxStep) : p.end;
      const fill = PHASE_COLOURS[p.kind] || "#9ca3af";
      const lanes = atStep[p.start];
      if (lanes.length > 1) {
        const lane = lanes.indexOf(p), half = Math.max(0.5, minWidth / 2);
        out.push({ type: "rect", xref: "x", yref: "paper", x0: p.start - half, x1: p.start + half, y0: lane / lanes.length,
                   y1: (lane + 1) / lanes.length, line: { width: 0 }, fillcolor: fill, opacity: 0.25, layer: "below" });
        if (end === p.start) continue;
        out.push({ type: "rect", xref: "x", yref: "paper", x0: p.start + half, x1: Math.max(end + 0.5, p.start + half), y0: 0, y1: 1, line: { width: 0 },
                   fillcolor: fill, opacity: 0.13, layer: "below" });
        continue;
      }
      const half = Math.max(0.5, (minWidth - (end - p.start)) / 2);
      out.push({ type: "rect", xref: "x", yref: "paper", x0: p.start - half, x1: end + half, y0: 0, y1: 1, line: { width: 0 },
                 fillcolor: fill, opacity: 0.13, layer: "below" });
    }
    for (const a of data.attempts) {
      if (a.number < 2 || a.start_step === null) continue;
      out.push({ type: "line", xref: "x", yref: "paper", x0: a.start_step, x1: a.start_step, y0: 0, y1: 1,
                 line: { color: "#ef4444", width: 1, dash: "dash" } });
    }
    return out;
  }

  function alertsFor(metric, component) {
    return data.alerts.filter((a) => (a.component || "") === component && (a.metric === metric || (!a.metric && component)));
  }

  function annotations(chart, span) {
    // Restarts a few hundred steps apart (a run that fell over repeatedly) would print their labels on top of
    // each other: each label goes on the first of LABEL_ROWS rows where it clears the one before it, and one
    // that fits on none is folded into the label before it (its text in that label's hover).
    const LABEL_ROWS = 3;
    const out = [];
    const restarts = data.attempts.filter((a) => a.number >= 2 && a.start_step !== null).sort((a, b) => a.start_step - b.start_step);
    const width = Math.max(100, (chart.el.clientWidth || 400) - 72);
    const perStep = span[1] > span[0] ? width / (span[1] - span[0]) : 0;
    const rowEnds = new Array(LABEL_ROWS).fill(-Infinity);
    for (const a of restarts) {
      const text = a.rewind ? "restart (rewind from " + a.rewind.from_step + ")" : "restart";
      const x0 = a.start_step * perStep, x1 = x0 + text.length * 5.5 + 6; // 9 px text is about 5.5 px a character
      const row = rowEnds.findIndex((end) => end <= x0);
      if (row < 0 && out.length) {
        const last = out[out.length - 1];
        last.folded = (last.folded || 1) + 1;
        last.hovertext = (last.hovertext || last.text) + "<br>" + text + " at step " + a.start_step;
        last.text = last.base + " (+" + (last.folded - 1) + " more)";
        continue;
      }
      const r = row < 0 ? 0 : row;
      rowEnds[r] = x1;
      out.push({ x: a.start_step, y: 1 - r * 0.09, xref: "x", yref: "paper", text, base: text, hovertext: text + " at step " + a.start_step,
                 showarrow: false, font: { size: 9, color: "#b91c1c" }, xanchor: "left", yanchor: "top", visible: !chart.small });
    }
    for (const a of out) delete a.base, delete a.folded;
    return out;
  }

  function stepSpan(body) {
    // The steps the x axis shows: the zoomed range, or the run's drawn steps.
    if (range) return range;
    const steps = body.step;
    return steps.length ? [steps[0], Math.max(steps[steps.length - 1], data.max_step || 0)] : [0, data.max_step || 0];
  }

  function stepAxis(body) {
    // Steps are whole numbers: on a short run or a close zoom Plotly's own ticks would read 1.2, 1.4.
    const span = stepSpan(body);
    const axis = { range: range || undefined, autorange: range ? false : true, zeroline: false, tickfont: { size: 10 } };
    const width = span[1] - span[0];
    if (width < 60) Object.assign(axis, { tickmode: "linear", tick0: 0, dtick: Math.max(1, Math.ceil(width / 6)), tickformat: "d" });
    if (!range && width === 0) Object.assign(axis, { range: [span[0] - 1, span[0] + 1], autorange: false });
    return axis;
  }

  function bandShape(band) {
    // One closed shape per stretch of band: upper edge forwards, lower edge back. The API breaks the band
    // (nulls) at every restart and where history is missing; Plotly's "tonexty" fill would join the stretches
    // across such a gap into wedges, "toself" closes each one on itself.
    const x = [], y = [];
    let stretch = [];
    const close = () => {
      if (!stretch.length) return;
      for (const i of stretch) { x.push(band.step[i]); y.push(band.upper[i]); }
      for (let k = stretch.length - 1; k >= 0; k--) { x.push(band.step[stretch[k]]); y.push(band.lower[stretch[k]]); }
      x.push(null); y.push(null);
      stretch = [];
    };
    band.step.forEach((_, i) => { if (band.lower[i] === null || band.upper[i] === null) close(); else stretch.push(i); });
    close();
    return { x, y };
  }

  function traces(chart, body, other) {
    const t = [];
    const band = body.band;
    if (band && band.step.length) {
      const shape = bandShape(band);
      t.push({ x: shape.x, y: shape.y, mode: "lines", line: { width: 0 }, fill: "toself", fillcolor: "rgba(34,197,94,0.18)",
               name: "band", hoveron: "points", hovertemplate: "band edge %{y:.4g}<extra></extra>" });
      t.push({ x: band.step, y: band.centre, mode: "lines", line: { width: 1, dash: "dot", color: "rgba(21,128,61,0.7)" },
               name: "band centre", hoverinfo: "skip", connectgaps: false });
    }
    if (body.resolution !== "raw" || body.bucket_steps > 1) {
      t.push({ x: body.step, y: body.min.map(num), mode: "lines", line: { width: 0 }, hoverinfo: "skip", showlegend: false });
      t.push({ x: body.step, y: body.max.map(num), mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: "rgba(37,99,235,0.15)",
               name: "min–max", hovertemplate: "max %{y:.4g}<extra></extra>" });
    }
    // A line needs two points: a value with no finite neighbour (a run's only point, one between NaNs) is a marker.
    const last = body.last.map(num);
    const alone = [];
    last.forEach((v, i) => { if (v !== null && (i === 0 || last[i - 1] === null) && (i === last.length - 1 || last[i + 1] === null)) alone.push(i); });
    if (alone.length) {
      t.push({ x: alone.map((i) => body.step[i]), y: alone.map((i) => last[i]), mode: "markers", marker: { color: "#1d4ed8", size: 7 },
               name: plotlyText(chart.metric) + " (single point)", showlegend: false, customdata: named(alone, chart.metric),
               hovertemplate: "step %{x}<br>%{customdata} %{y:.5g}<extra></extra>" });
    }
    t.push({ x: body.step, y: body.last.map(num), mode: "lines", line: { width: 1.3, color: "#1d4ed8" },
             name: plotlyText(other ? thisLabel() : chart.metric), role: "run", customdata: named(body.step, chart.metric),
             hovertemplate: "step %{x}<br>%{customdata} %{y:.5g}<extra></extra>" });
    if (other) {
      // The other run's last value of each bucket: its envelope, band and alerts stay its own page's.
      t.push({ x: other.step, y: other.last.map(num), mode: "lines", line: { width: 1.3, color: COMPARE_COLOUR, dash: "dash" },
               name: plotlyText(other.name), connectgaps: false, role: "compare", customdata: named(other.step, other.name),
               hovertemplate: "step %{x}<br>%{customdata} %{y:.5g}<extra></extra>" });
    }
    const bad = body.step.filter((_, i) => body.nonfinite[i] > 0);
    if (bad.length) {
      // Along the bottom edge: the alert a NaN raises is marked at the top of the same step, and neither hides the other.
      t.push({ x: bad, y: bad.map(() => 0.04), yaxis: "y2", mode: "markers", cliponaxis: false, marker: { symbol: "x", color: "#dc2626", size: 9 },
               name: "non-finite", text: body.step.map((s, i) => body.nonfinite[i]).filter((n) => n > 0),
               hovertemplate: "step ≤ %{x}: %{text} non-finite<extra></extra>" });
    }
    const marks = alertsFor(chart.metric, chart.component);
    if (marks.length) {
      t.push({ x: marks.map((a) => a.step), y: marks.map(() => 0.98), yaxis: "y2", mode: "markers", cliponaxis: false,
               marker: { symbol: "triangle-down", color: "#dc2626", size: 11 }, name: "alert", customdata: marks.map((a) => plotlyText(a.rule.name)),
               hovertemplate: "alert %{customdata} at step %{x}<extra></extra>" });
    }
    return t;
  }

  // A run's name is free text, and Plotly reads a trace's name and hover as its own little HTML: shown as typed.
  function plotlyText(text) { return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }

  // Names reach a hover as customdata, never inside the hovertemplate: Plotly has no escape for "%{", so a run
  // named "exp-%{y}" would print a value there, while what customdata holds is inserted as it is. For the same
  // reason no trace has a `meta` (Plotly then reads the trace's name as a template too: the legend would print
  // "exp-"); which line is which run is the traces' own `role`.
  function named(points, text) { const label = plotlyText(text); return points.map(() => label); }

  function thisLabel() {
    const form = document.getElementById("compare-form");
    return (form && form.dataset.runLabel) || data.run;
  }

  function valueRange(body, other) {
    // The data decides the y range (min–max envelope included, so spikes show); the band is clipped to it.
    // A compared run's line is in it too: a reference far below or above is the point of comparing.
    let lo = Infinity, hi = -Infinity;
    for (const arr of [body.min, body.max, body.last].concat(other ? [other.last] : [])) {
      for (const v of arr) { const x = num(v); if (x !== null) { if (x < lo) lo = x; if (x > hi) hi = x; } }
    }
    if (!isFinite(lo)) return undefined;
    const pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    return [lo - pad, hi + pad];
  }

  function layout(chart, body, other) {
    const marks = alertsFor(chart.metric, chart.component);
    const legend = Boolean(other) && !chart.small;
    const s = shapes(data.max_step);
    for (const a of marks) {
      s.push({ type: "line", xref: "x", yref: "paper", x0: a.step, x1: a.step, y0: 0, y1: 1, line: { color: "#dc2626", width: 1 } });
    }
    return {
      margin: chart.small ? { l: 44, r: 8, t: 6, b: 24 } : { l: 56, r: 16, t: legend ? 28 : 10, b: 30 },
      height: chart.small ? 150 : chart.big ? 320 : 220,
      // Comparing, the legend names the two runs (and nothing else: the page's legend explains the rest).
      showlegend: legend,
      legend: { orientation: "h", x: 0, y: 1, yanchor: "bottom", font: { size: 10 } },
      xaxis: stepAxis(body),
      yaxis: { zeroline: false, tickfont: { size: 10 }, fixedrange: false, range: valueRange(body, other), autorange: valueRange(body, other) ? false : true },
      yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
      shapes: s,
      annotations: annotations(chart, stepSpan(body)),
      plot_bgcolor: "#fff", paper_bgcolor: "#fff",
      hovermode: "x",
    };
  }

  async function fetchBody(chart) {
    const width = Math.max(100, Math.floor(chart.el.clientWidth || 400));
    const params = new URLSearchParams({ metric: chart.metric, buckets: String(Math.min(2000, width * 2)), band: "1" });
    if (chart.component) params.set("component", chart.component);
    if (range) { params.set("start", String(Math.max(0, Math.floor(range[0])))); params.set("end", String(Math.ceil(range[1]))); }
    const response = await fetch(runPath + "?" + params.toString(), { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(response.status + " " + (await response.text()));
    return response.json();
  }

  async function fetchCompare(chart) {
    // The compared run's same series over the steps this chart shows (the zoomed range, or this run's steps),
    // in as many buckets; kept while neither the run, the range nor this run's last step changes.
    if (!compare || data.max_step === null) return null;
    const width = Math.max(100, Math.floor(chart.el.clientWidth || 400));
    const span = range ? [Math.max(0, Math.floor(range[0])), Math.ceil(range[1])] : [0, data.max_step];
    const params = new URLSearchParams({ metric: chart.metric, buckets: String(Math.min(2000, width * 2)), compare: compare.run,
                                         start: String(span[0]), end: String(span[1]) });
    if (chart.component) params.set("component", chart.component);
    const key = params.toString();
    if (chart.compared && chart.compared.key === key) return chart.compared.body;
    try {
      const response = await fetch(runPath + "?" + key, { credentials: "same-origin", headers: { Accept: "application/json" } });
      // A run that went away since the page opened draws nothing beside this one; this run's chart still draws.
      const body = response.ok ? await response.json() : null;
      chart.compared = { key, body };
      return body;
    } catch (err) {
      return null;
    }
  }

  async function replaced(chart) {
    // A restart is its own attempt: where it re-sent steps, the earlier attempt's points are drawn faded.
    if (chart.small) return [];
    if (chart.replaced) return chart.replaced;
    const out = [];
    for (const a of data.attempts) {
      if (!a.rewind) continue;
      const params = new URLSearchParams({ metric: chart.metric, start: String(a.rewind.to_step), end: String(a.rewind.from_step), attempt: "all" });
      if (chart.component) params.set("component", chart.component);
      const response = await fetch(runPath.replace(/series\/$/, "points/") + "?" + params.toString(), { credentials: "same-origin" });
      if (!response.ok) continue;
      // One line per earlier attempt: a range re-sent twice holds two of them, and one line through both would zigzag.
      const byAttempt = new Map();
      for (const p of (await response.json()).points) {
        if (p.attempt < a.number) { if (!byAttempt.has(p.attempt)) byAttempt.set(p.attempt, []); byAttempt.get(p.attempt).push(p); }
      }
      for (const [attempt, earlier] of byAttempt) {
        out.push({ x: earlier.map((p) => p.step), y: earlier.map((p) => num(p.value)), mode: "lines", name: "attempt " + attempt + " (re-sent by " + a.number + ")",
                   line: { width: 1, color: "rgba(107,114,128,0.75)", dash: "dot" }, hovertemplate: "earlier attempt, step %{x}: %{y:.5g}<extra></extra>" });
      }
    }
    chart.replaced = out;
    return out;
  }

  async function draw(chart) {
    chart.loading = true;
    try {
      const [body, earlier, fetched] = await Promise.all([fetchBody(chart), replaced(chart), fetchCompare(chart)]);
      const other = fetched && fetched.step.length ? fetched : null;
      const drawn = traces(chart, body, other).concat(earlier);
      if (other) for (const t of drawn) t.showlegend = t.role === "run" || t.role === "compare";
      await Plotly.react(chart.el, drawn, layout(chart, body, other), { displaylogo: false, responsive: true,
        modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"] });
      chart.el.dataset.resolution = body.resolution;
      if (other) chart.el.dataset.compared = other.run; else delete chart.el.dataset.compared;
      chart.el.dataset.drawn = "1";
      if (!chart.bound) {
        chart.bound = true;
        chart.el.on("plotly_relayout", (ev) => onZoom(ev, chart));
      }
    } catch (err) {
      chart.el.textContent = "Could not load " + chart.metric + ": " + err.message;
      chart.el.classList.add("chart-error");
    } finally {
      chart.loading = false;
    }
  }

  function onZoom(ev, chart) {
    if (zooming) return;
    let next;
    if (ev["xaxis.autorange"]) next = null;
    else if (ev["xaxis.range[0]"] !== undefined) next = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
    else if (ev["xaxis.range"]) next = ev["xaxis.range"];
    else return;
    // Whole steps, as the page reads them back from the URL: the shared link opens on the range drawn here.
    range = next && [Math.max(0, Math.floor(next[0])), Math.ceil(next[1])];
    shareRange(chart);
    redrawVisible();
  }

  function shareRange(chart) {
    // The address bar names the zoomed view (?metric=&component=&start=&end=, what the page honours when
    // typed), so copying it shares what is on screen; a reset drops start and end.
    const url = new URL(window.location.href);
    const q = url.searchParams;
    if (chart) {
      q.set("metric", chart.metric);
      if (chart.component) q.set("component", chart.component); else q.delete("component");
    }
    if (range) { q.set("start", String(range[0])); q.set("end", String(range[1])); } else { q.delete("start"); q.delete("end"); }
    history.replaceState(history.state, "", url.pathname + (q.toString() ? "?" + q.toString() : "") + url.hash);
  }

  function redrawVisible() {
    zooming = true;
    Promise.all(charts.filter((c) => c.visible).map(draw)).finally(() => { zooming = false; });
  }

  document.querySelectorAll(".chart[data-metric]").forEach((el) => {
    charts.push({ el, metric: el.dataset.metric, component: el.dataset.component || "", small: el.classList.contains("chart-small"),
                  big: el.classList.contains("chart-big"), visible: false, bound: false });
  });
  // A link into the run at a step range (a review's evidence, a log entry): ?metric=&component=&start=&end=
  // opens every chart at that range and brings the named series' chart into view.
  const asked = new URLSearchParams(window.location.search);
  const askedStart = Number(asked.get("start")), askedEnd = Number(asked.get("end"));
  if (asked.get("start") !== null && asked.get("end") !== null && Number.isFinite(askedStart) && Number.isFinite(askedEnd) && askedEnd >= askedStart) {
    range = [askedStart, askedEnd];
    document.body.dataset.linkedRange = askedStart + "-" + askedEnd;
  } else if (data.range) {
    range = data.range.slice(); // a page about some steps (an incident's) opens on them
  }
  if (asked.get("metric")) {
    const focus = charts.find((c) => c.metric === asked.get("metric") && c.component === (asked.get("component") || ""))
      || charts.find((c) => c.metric === asked.get("metric"));
    if (focus) { focus.el.classList.add("chart-focus"); focus.el.scrollIntoView({ block: "center" }); document.body.dataset.linkedChart = focus.metric + "@" + focus.component; }
  }
  // Compare with: the page lists only runs the viewer may compare with and selects the one ?compare= names if it
  // is one of them; anything else in the link is dropped from the address bar, as if it had never been there.
  const compareForm = document.getElementById("compare-form");
  const compareSelect = document.getElementById("compare-select");
  function chooseCompare() {
    const option = compareSelect && compareSelect.selectedOptions[0];
    compare = option && option.value ? { run: option.value, label: option.dataset.label || option.value } : null;
    const url = new URL(window.location.href);
    if (compare) url.searchParams.set("compare", compare.run); else url.searchParams.delete("compare");
    const q = url.searchParams.toString();
    history.replaceState(history.state, "", url.pathname + (q ? "?" + q : "") + url.hash);
    const key = document.getElementById("compare-legend");
    if (key) key.remove();
    const legend = document.querySelector(".legend");
    if (compare && legend) {
      const item = document.createElement("span");
      item.id = "compare-legend";
      const sw = document.createElement("i");
      sw.className = "sw sw-compare";
      item.append(sw, compare.label);
      legend.insertBefore(item, document.getElementById("reset-zoom"));
    }
    document.body.dataset.compare = compare ? compare.run : "";
  }
  if (compareSelect) {
    chooseCompare();
    compareSelect.addEventListener("change", () => { chooseCompare(); redrawVisible(); });
    // "Find" keeps what the address bar holds (the zoom, the chosen run) and narrows the list.
    compareForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const url = new URL(window.location.href);
      const text = document.getElementById("compare-search").value.trim();
      if (text) url.searchParams.set("compare_q", text); else url.searchParams.delete("compare_q");
      window.location.assign(url.pathname + "?" + url.searchParams.toString() + url.hash);
    });
  } else if (asked.get("compare") !== null) {
    const url = new URL(window.location.href);
    url.searchParams.delete("compare");
    const q = url.searchParams.toString();
    history.replaceState(history.state, "", url.pathname + (q ? "?" + q : "") + url.hash);
  }
  // What is on screen first, then the rest one after another, so the first chart is never kept waiting.
  // The rest start as soon as the observer has placed every chart and the on-screen ones are drawn, not
  // after a fixed delay: where the alerts push every chart below the fold, the first one drawn is one of
  // the rest.
  const onScreen = [];
  let placed = 0, restStarted = false;
  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      const chart = charts.find((c) => c.el === entry.target);
      if (!chart.placed) { chart.placed = true; placed++; }
      if (entry.isIntersecting && !chart.visible) { chart.visible = true; onScreen.push(draw(chart)); }
    }
    if (placed === charts.length && !restStarted) drawTheRest();
  }, { rootMargin: "200px" });
  charts.forEach((c) => observer.observe(c.el));
  async function drawTheRest() {
    restStarted = true;
    await Promise.all(onScreen);
    for (const chart of charts) {
      if (!chart.visible) { chart.visible = true; await draw(chart); }
    }
    document.body.dataset.chartsDrawn = "1";
  }
  if (!charts.length) drawTheRest();

  document.getElementById("reset-zoom").addEventListener("click", () => { range = null; shareRange(null); redrawVisible(); });

  // The legend names only the phases this run had: a swatch for a phase it never entered explains nothing.
  const had = new Set(data.phases.map((p) => p.kind));
  if (data.attempts.some((a) => a.number >= 2 && a.start_step !== null)) had.add("restart");
  const listed = new Set();
  document.querySelectorAll(".legend .sw").forEach((sw) => {
    const kind = Array.from(sw.classList).find((c) => c.startsWith("sw-phase-"));
    if (!kind) return;
    listed.add(kind.slice("sw-phase-".length));
    if (!had.has(kind.slice("sw-phase-".length))) sw.parentElement.hidden = true;
  });
  // And every phase it had that is shaded on the charts (lr_decay, cooldown, a job's own kinds) gets a swatch.
  const legend = document.querySelector(".legend");
  for (const kind of had) {
    if (kind === "steady" || listed.has(kind) || !legend) continue;
    const item = document.createElement("span");
    const sw = document.createElement("i");
    sw.className = "sw sw-phase-" + kind;
    sw.style.backgroundColor = PHASE_COLOURS[kind] || "#9ca3af";
    sw.style.opacity = "0.3";
    item.append(sw, kind.replace(/_/g, " "));
    legend.insertBefore(item, document.getElementById("reset-zoom"));
  }

  function cell(text, cls) { const td = document.createElement("td"); if (cls) td.className = cls; td.textContent = text; return td; }

  function alertRow(a) {
    // The alerts table follows the websocket: a new alert gets a row, a changed one its new state.
    const table = document.getElementById("run-alerts");
    if (!table) return;
    table.hidden = false;
    const none = document.getElementById("no-alerts");
    if (none) none.remove();
    let row = table.querySelector('tr[data-alert-id="' + a.id + '"]');
    const pill = '<span class="pill pill-' + a.state + '">' + a.state.charAt(0).toUpperCase() + a.state.slice(1) + "</span>";
    if (row) { row.cells[0].innerHTML = pill; row.className = "alert-row state-" + a.state; return; }
    row = document.createElement("tr");
    row.className = "alert-row state-" + a.state + " live-new";
    row.dataset.alertId = a.id;
    const state = document.createElement("td"); state.innerHTML = pill; row.appendChild(state);
    const rule = document.createElement("td"); const link = document.createElement("a");
    link.href = data.links[a.rule.id] || a.rule.diagnostic_url; link.target = "_blank"; link.rel = "noopener"; link.textContent = a.rule.name; rule.appendChild(link); row.appendChild(rule);
    row.appendChild(cell(a.component || "(run)"));
    row.appendChild(cell(a.metric || a.condition || ""));
    row.appendChild(cell(a.step, "num"));
    row.appendChild(cell(a.fired_step === null ? "—" : a.fired_step, "num"));
    row.appendChild(cell(a.magnitude === null ? "—" : Number(a.magnitude).toPrecision(4) + " " + (a.magnitude_unit || ""), "num"));
    row.appendChild(cell(a.phase || "—"));
    row.appendChild(cell(a.rule.permitted_response));
    table.tBodies[0].prepend(row);
  }

  // Live: new points redraw what is on screen; alerts and status changes update in place.
  let pending = null;
  function liveMessage(msg) {
    if (msg.type === "points") {
      if (msg.last_step !== undefined && msg.last_step !== null) {
        data.max_step = Math.max(data.max_step || 0, msg.last_step);
        document.getElementById("run-last-step").textContent = msg.last_step;
      }
      clearTimeout(pending);
      pending = setTimeout(redrawVisible, 500);
    } else if (msg.type === "alert" && msg.alert) {
      const known = data.alerts.findIndex((a) => a.id === msg.alert.id);
      if (known >= 0) data.alerts[known] = msg.alert; else data.alerts.push(msg.alert);
      alertRow(msg.alert);
      const open = data.alerts.filter((a) => a.state !== "resolved").length;
      document.getElementById("run-open-alerts").textContent = open;
      document.body.dataset.liveAlerts = String(data.alerts.length);
      clearTimeout(pending);
      pending = setTimeout(redrawVisible, 300);
    } else if ((msg.type === "run" || msg.type === "review") && (msg.label || msg.status)) {
      // The server's word (alerts/health.py): never "Healthy" while an incident is open or waits for review.
      const badge = document.getElementById("run-status");
      const key = msg.health || msg.status;
      badge.textContent = msg.label || key.charAt(0).toUpperCase() + key.slice(1);
      badge.className = "status status-" + key;
    }
  }
  if (window.WL && WL.live) {
    WL.live.connect(WL.live.runPath(data.run), liveMessage, { onState: (state, info) => { document.body.dataset.live = state; if (info && info.reconnected) redrawVisible(); } });
  }
  window.WLRun = { charts, data, redraw: redrawVisible, liveMessage };
})();
