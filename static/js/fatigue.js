/* The fatigue page's charts: figures from the page's json_script element (audit/fatigue.py), drawn with the
 * Plotly served from static files (no inline script under the Content-Security-Policy). */
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("fatigue-data").textContent);
  const x = data.days;
  const layout = (extra) => Object.assign({margin: {l: 50, r: 20, t: 10, b: 40}, showlegend: true,
    legend: {orientation: "h"}, xaxis: {type: "date"}}, extra || {});
  const config = {displayModeBar: false, responsive: true};
  const hline = (y, name, dash) => ({x: [x[0], x[x.length - 1]], y: [y, y], mode: "lines", name: name,
    line: {dash: dash || "dash", width: 1, color: "#888"}});
  Plotly.newPlot("fatigue-volume", [
    {x: x, y: data.alerts, type: "bar", name: "alerts"},
    {x: x, y: data.incidents, type: "scatter", mode: "lines+markers", name: "incidents"},
    {x: x, y: data.pages, type: "scatter", mode: "lines+markers", name: "pages"},
  ], layout(), config);
  const [low, high] = data.reference_no_action;
  Plotly.newPlot("fatigue-actionable", [
    {x: x, y: data.actionable_share, type: "scatter", mode: "lines+markers", name: "actionable share", connectgaps: false},
    hline(1 - high, "1% actionable (99% needing no action)"),
    hline(1 - low, "15% actionable (85% needing no action)"),
    hline(1 - data.reference_false, "11.2% actionable (88.8% false)", "dot"),
  ], layout({yaxis: {range: [0, 1], tickformat: ".0%"}}), config);
  Plotly.newPlot("fatigue-ack", [
    {x: x, y: data.median_ack_seconds, type: "scatter", mode: "lines+markers", name: "median seconds to acknowledge"},
  ], layout({yaxis: {title: "seconds"}}), config);
  for (const rule of data.rules) {
    Plotly.newPlot("spark-" + rule.rule_id, [{x: x, y: rule.alerts, type: "scatter", mode: "lines", line: {width: 1}}],
      {margin: {l: 0, r: 0, t: 0, b: 0}, xaxis: {visible: false}, yaxis: {visible: false}, showlegend: false},
      {displayModeBar: false, staticPlot: true});
  }
})();
