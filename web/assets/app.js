// ralph web: live updates of a run page through Server-Sent Events. Every
// page works without this script; it only keeps an open run page current.
"use strict";
(function () {
  const run = document.getElementById("run");
  if (!run || run.dataset.live !== "true" || !window.EventSource) return;
  const id = run.dataset.run;
  const chain = document.getElementById("chain");
  const output = document.getElementById("output");
  const state = document.getElementById("state");
  let reloadTimer = 0;
  // reload fetches the page again and swaps in the parts that change.
  function reload() {
    clearTimeout(reloadTimer);
    reloadTimer = setTimeout(function () {
      fetch("/runs/" + id, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(function (html) {
        const doc = new DOMParser().parseFromString(html, "text/html");
        for (const sel of ["#summary", "#conditions", "#budgets", "#verify", "#controls"]) {
          const now = document.querySelector(sel), next = doc.querySelector(sel);
          if (now && next) now.replaceWith(next);
        }
      }).catch(function () {});
    }, 400);
  }
  function line(a) {
    const li = document.createElement("li");
    li.dataset.seq = a.seq; li.dataset.type = a.type; li.className = "new" + (a.failed ? " failed" : "");
    const seq = document.createElement("span"); seq.className = "seq"; seq.textContent = "#" + a.seq;
    const label = document.createElement("span"); label.className = "label"; label.textContent = " " + a.label;
    li.append(seq, label);
    if (a.detail) { const d = document.createElement("span"); d.className = "detail"; d.textContent = " " + a.detail; li.append(d); }
    return li;
  }
  const es = new EventSource("/runs/" + id + "/events?from=" + (Number(run.dataset.head) + 1));
  es.addEventListener("action", function (ev) {
    const a = JSON.parse(ev.data);
    if (chain.querySelector('[data-seq="' + a.seq + '"]')) return;
    if (a.type === "IterationStarted") { // a new iteration: a node of its own, open
      const li = document.createElement("li");
      li.className = "iteration new"; li.dataset.seq = a.seq; li.dataset.iteration = a.iteration; li.id = "it-" + a.iteration;
      const d = document.createElement("details"); d.open = true;
      const s = document.createElement("summary");
      const label = document.createElement("span"); label.className = "label"; label.textContent = "Iteration " + a.iteration;
      s.append(label);
      d.append(s, document.createElement("ol"));
      li.append(d);
      chain.append(li);
      reload();
      return;
    }
    const its = chain.querySelectorAll(":scope > li.iteration > details > ol");
    (its.length ? its[its.length - 1] : chain).append(line(a));
    if (a.type === "IterationCompleted" || a.type === "StopConditionsEvaluated") reload();
  });
  es.addEventListener("output", function (ev) {
    const o = JSON.parse(ev.data);
    if (o.call && o.call !== output.dataset.call) { // a new call: its output alone
      output.dataset.call = o.call;
      output.textContent = "";
    }
    output.textContent += o.text;
    if (output.textContent.length > 200000) output.textContent = output.textContent.slice(-100000);
    output.scrollTop = output.scrollHeight;
  });
  es.addEventListener("state", function (ev) {
    if (state) state.textContent = JSON.parse(ev.data).state;
    reload();
  });
  es.addEventListener("conditions", reload);
  es.addEventListener("approve", function (ev) {
    const form = document.getElementById("approve");
    if (!form) return;
    const it = String(JSON.parse(ev.data).iteration);
    form.querySelector('input[name="iteration"]').value = it;
    form.querySelector(".approve-iteration").textContent = it;
    form.hidden = false;
  });
  es.addEventListener("snapshot", function () { location.reload(); });
  es.addEventListener("end", function () { es.close(); location.reload(); });
  es.addEventListener("unavailable", function (ev) {
    es.close(); // following again would only be refused again: say why, once
    const p = document.createElement("p");
    p.id = "live-unavailable"; p.className = "note"; p.setAttribute("role", "status");
    p.textContent = "Live updates are off: " + JSON.parse(ev.data).why + " Reload the page to try again.";
    run.prepend(p);
  });
})();
