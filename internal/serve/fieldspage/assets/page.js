// Recomputes the cost as fields are ticked, from the per-field costs the
// server wrote into each row (data-v: the field's own family, data-s: what
// the first window statistic adds, data-p: each statistic), and refreshes
// the file previews. Without it the form's buttons do the same on the server.
(function () {
  "use strict";
  var form = document.getElementById("fields");
  var cost = document.getElementById("cost");
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.field"));
  function pair(s) { var p = s.split(" "); return [Number(p[0]), Number(p[1])]; }
  function human(n) { return n < 1024 ? n + " B" : (n / 1024).toFixed(1) + " KiB"; }
  function rowCost(tr) {
    var v = pair(tr.dataset.v), s = pair(tr.dataset.s), p = pair(tr.dataset.p);
    var n = tr.querySelectorAll("input.stat:checked").length;
    if (n === 0) { return v; }
    return [v[0] + s[0] + n * p[0], v[1] + s[1] + n * p[1]];
  }
  function query(format) {
    var q = new URLSearchParams();
    new FormData(form).forEach(function (value, key) {
      if (key !== "format" && value !== "") { q.append(key, value); }
    });
    if (format) { q.set("format", format); }
    return q;
  }
  var timer = null, generation = 0;
  function refreshFiles() {
    clearTimeout(timer);
    timer = setTimeout(function () {
      var mine = ++generation;
      ["csv", "configmap", "values"].forEach(function (format) {
        var out = document.getElementById("out-" + format);
        if (!query().has("field")) { out.textContent = ""; return; }
        fetch("fields.csv?" + query(format)).then(function (r) {
          return r.text();
        }).then(function (text) {
          if (mine === generation) { out.textContent = text; }
        });
      });
    }, 200);
  }
  function update() {
    var series = Number(cost.dataset.baseSeries), bytes = Number(cost.dataset.baseBytes);
    rows.forEach(function (tr) {
      var c = rowCost(tr);
      tr.querySelector(".fcost").textContent = c[0] + " series, " + human(c[1]);
      if (tr.querySelector("input.pick").checked) { series += c[0]; bytes += c[1]; }
    });
    document.getElementById("cost-series").textContent = String(series);
    var b = document.getElementById("cost-bytes");
    b.textContent = human(bytes);
    b.dataset.bytes = String(bytes);
    document.getElementById("cost-sps").textContent = (series / Number(cost.dataset.scrape)).toFixed(1);
    refreshFiles();
  }
  form.addEventListener("change", update);
  document.documentElement.classList.add("js");
})();
