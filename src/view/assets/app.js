// sandgym view: the page's script. Plain DOM, charts by uPlot (vendored); every text from the
// server is set as text, never as markup.
"use strict";

const state = {
  summary: null,
  metricsKey: "",
  episodes: [],
  rollouts: null,
  selected: null,
  episode: null,
};

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path, options) {
  const r = await fetch(path, options);
  let body;
  try { body = await r.json(); } catch (e) { body = { error: `not JSON (${r.status})` }; }
  if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
  return body;
}

const problems = new Map();
function setProblems(kind, list) {
  problems.set(kind, list || []);
  const all = [...problems.values()].flat();
  const box = document.getElementById("problems");
  box.hidden = all.length === 0;
  box.textContent = all.length ? "Could not read everything:\n" + all.join("\n") : "";
}

function fmt(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toFixed(digits)) : String(x);
}

// ---------- tabs ----------
function showTab(name) {
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.tab === name);
  for (const p of document.querySelectorAll(".panel")) p.hidden = p.id !== name;
  if (name === "labels") loadLabels();
  if (name === "versions") loadDecisions();
  if (name === "curves") for (const c of charts) c.plot.setSize(chartSize(c.div));
}
for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => showTab(b.dataset.tab));

// ---------- curves ----------
const CURVES = [
  ["reward_mean", "Reward (mean of the iteration's episodes)"],
  ["success_rate", "Success: sampled, the fixed-seed evaluations, the closing one"],
  ["entropy", "Entropy of the sampling distribution"],
  ["kl_ref", "KL to the reference policy"],
  ["ppo_kl", "KL between sampling and updated policy"],
  ["clip_frac", "Clip fraction"],
  ["tokens_per_s", "Generated tokens / s"],
  ["env_steps_per_s", "Env steps / s"],
];
let charts = [];

function chartSize(div) {
  return { width: Math.max(300, div.clientWidth - 12), height: 220 };
}

function renderCharts(metrics, evals, closing) {
  const box = document.getElementById("charts");
  box.replaceChildren();
  charts = [];
  const note = document.getElementById("curves-note");
  if (metrics.length === 0) {
    note.textContent = state.summary && state.summary.kind !== "run"
      ? "This source has no training curves; see its episodes."
      : "No iterations logged yet (metrics.jsonl); the page updates as the run goes.";
  } else {
    note.textContent = `${metrics.length} iterations` + (evals.length ? `, ${evals.length} evaluations` : "") +
      (closing && closing.policy ? `; closing evaluation: policy ${closing.policy.success_rate.toFixed(3)}` + (closing.baseline ? `, baseline ${closing.baseline.success_rate.toFixed(3)}` : "") : "") +
      ". Drag to zoom, double-click to reset; hover for values.";
  }
  if (metrics.length === 0) return;
  const xs = metrics.map((m) => m.iter);
  for (const [key, title] of CURVES) {
    const ys = metrics.map((m) => (typeof m[key] === "number" ? m[key] : null));
    const series = [{ label: "iteration" }, { label: key, stroke: "#2459c9", width: 2, spanGaps: true, points: { show: xs.length < 60 } }];
    const data = [xs, ys];
    let points = xs.length;
    if (key === "success_rate" && (evals.length || closing)) {
      // The evaluation points sit on the iterations they were taken after (0: before
      // training); the closing evaluation's policy and baseline on the last iteration.
      const last = xs[xs.length - 1];
      const allX = [...new Set([...xs, ...evals.map((e) => e.iter), last])].sort((a, b) => a - b);
      const at = (pairs) => { const m = new Map(pairs); return allX.map((x) => (m.has(x) ? m.get(x) : null)); };
      data.splice(0, 2, allX, at(metrics.map((m) => [m.iter, m.success_rate])));
      series[1].label = "sampled";
      if (evals.length) {
        data.push(at(evals.map((e) => [e.iter, e.success_rate])));
        series.push({ label: "evaluation (greedy)", stroke: "#c62828", width: 2, spanGaps: true, points: { show: true } });
      }
      if (closing && closing.policy) {
        data.push(at([[last, closing.policy.success_rate]]));
        series.push({ label: "closing: policy", stroke: "#1a7f37", width: 0, points: { show: true, size: 9 } });
      }
      if (closing && closing.baseline) {
        data.push(at([[last, closing.baseline.success_rate]]));
        series.push({ label: "closing: baseline", stroke: "#7a5af8", width: 0, points: { show: true, size: 9 } });
      }
      points = allX.length;
    }
    const div = el("div", { class: "chart", id: `chart-${key}`, "data-points": String(points), "data-series": String(series.length - 1) }, el("h3", { text: title }));
    box.append(div);
    const yValues = (u, vals) => vals.map((v) => (v === null ? ""
      : Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en")
      : v !== 0 && Math.abs(v) < 0.01 ? v.toPrecision(2)
      : String(+v.toFixed(3))));
    const opts = {
      ...chartSize(div), series,
      scales: { x: { time: false } },
      axes: [{ label: "iteration", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, { size: 64, values: yValues }],
      cursor: { drag: { x: true, y: false } },
    };
    const plot = new uPlot(opts, data, div);
    charts.push({ div, plot });
  }
}

async function loadMetrics() {
  const m = await api("/api/metrics");
  setProblems("metrics", m.problems);
  const key = JSON.stringify([m.metrics.length, m.evals.length, Boolean(m.closing), m.metrics.length ? m.metrics[m.metrics.length - 1].iter : 0]);
  if (key !== state.metricsKey) {
    state.metricsKey = key;
    renderCharts(m.metrics, m.evals, m.closing);
  }
}
window.addEventListener("resize", () => { for (const c of charts) c.plot.setSize(chartSize(c.div)); });

// ---------- episodes ----------
function fileOf(id) { return id.slice(0, id.lastIndexOf("#")); }

function batchLabel(file) {
  const m = /(train|eval|closing)-0*(\d+)\.jsonl$/.exec(file);
  if (!m) return file;
  const n = m[2] || "0";
  return { train: `training, iteration ${n}`, eval: `evaluation after iteration ${n}`, closing: `closing evaluation (after ${n})` }[m[1]];
}

function batchShort(file) {
  const m = /(train|eval|closing)-0*(\d+)\.jsonl$/.exec(file);
  return m ? `${m[1]} ${m[2] || "0"}` : file;
}

function lastEvalFile() {
  const files = [...new Set(state.episodes.map((e) => fileOf(e.id)))];
  const evals = files.filter((f) => /(eval|closing)-\d+\.jsonl$/.test(f));
  const rank = (f) => {
    const m = /(eval|closing)-0*(\d+)\.jsonl$/.exec(f);
    return Number(m[2] || 0) * 2 + (m[1] === "closing" ? 1 : 0);
  };
  evals.sort((a, b) => rank(a) - rank(b));
  return evals.length ? evals[evals.length - 1] : files[files.length - 1];
}

function updateFileOptions() {
  const select = document.getElementById("f-file");
  const files = [...new Set(state.episodes.map((e) => fileOf(e.id)))];
  const have = new Set([...select.options].map((o) => o.value));
  for (const f of files) if (!have.has(f)) select.append(el("option", { value: f, text: batchLabel(f) }));
}

function filtered() {
  const v = (id) => document.getElementById(id).value;
  const num = (id) => (v(id) === "" ? null : Number(v(id)));
  const file = v("f-file"), outcome = v("f-outcome"), error = v("f-error"), text = v("f-text").toLowerCase();
  const rmin = num("f-reward-min"), rmax = num("f-reward-max"), tmin = num("f-turns-min"), tmax = num("f-turns-max");
  return state.episodes.filter((e) =>
    (!file || fileOf(e.id) === file) &&
    (!outcome || (outcome === "success") === e.success) &&
    (!error || (error === "yes") === Boolean(e.error)) &&
    (!text || (e.task || "").toLowerCase().includes(text) || e.instruction.toLowerCase().includes(text)) &&
    (rmin === null || e.reward >= rmin) && (rmax === null || e.reward <= rmax) &&
    (tmin === null || e.turns >= tmin) && (tmax === null || e.turns <= tmax));
}

function renderEpisodeList() {
  const table = document.getElementById("episodes-table");
  if (state.rollouts) return renderRollouts();
  table.tHead.replaceChildren(el("tr", {}, ["batch", "#", "task", "seed", "outcome", "reward", "turns", "tokens"].map((h) => el("th", { text: h }))));
  const rows = filtered();
  document.getElementById("episode-count").textContent = `${rows.length} of ${state.episodes.length} episodes`;
  table.tBodies[0].replaceChildren(...rows.map((e) => {
    const outcome = e.error ? el("span", { class: "bad", title: e.error, text: "env error" })
      : e.success ? el("span", { class: "ok", text: "success" })
      : el("span", { class: "bad", text: e.out_of_context ? "out of context" : "failed" });
    const tr = el("tr", { class: "episode-row" + (e.id === state.selected ? " selected" : ""), "data-id": e.id, onclick: () => openEpisode(e.id) },
      el("td", { text: batchShort(fileOf(e.id)), title: batchLabel(fileOf(e.id)) }), el("td", { text: e.id.split("#").pop() }),
      el("td", { class: "task", text: e.task || e.instruction, title: e.instruction }), el("td", { text: e.seed }), el("td", {}, outcome),
      el("td", { text: fmt(e.reward) }), el("td", { text: e.turns }), el("td", { text: e.generated_tokens }));
    return tr;
  }));
}

function renderRollouts() {
  const table = document.getElementById("episodes-table");
  table.tHead.replaceChildren(el("tr", {}, ["rollout", "calls", "reward", "outcome", "breaks"].map((h) => el("th", { text: h }))));
  // The episode filters do not apply to a trace store's rollouts.
  for (const l of document.querySelectorAll("#filters label")) l.hidden = true;
  document.getElementById("failed-last-eval").hidden = true;
  document.getElementById("episode-count").textContent = `${state.rollouts.length} rollout${state.rollouts.length === 1 ? "" : "s"}`;
  table.tBodies[0].replaceChildren(...state.rollouts.map((r) => el("tr", { class: "episode-row", "data-id": r.id, onclick: () => openRollout(r.id) },
    el("td", { text: r.id }), el("td", { text: r.calls }), el("td", { text: fmt(r.reward) }),
    el("td", {}, el("span", { class: r.success ? "ok" : "bad", text: r.reward === null ? "no reward" : r.success ? "success" : "failed" })),
    el("td", {}, r.breaks ? el("span", { class: "break", text: r.breaks }) : "0"))));
}

for (const id of ["f-file", "f-outcome", "f-error", "f-text", "f-reward-min", "f-reward-max", "f-turns-min", "f-turns-max"]) {
  document.getElementById(id).addEventListener("input", renderEpisodeList);
}

document.getElementById("failed-last-eval").addEventListener("click", () => {
  showTab("episodes");
  const f = lastEvalFile();
  if (f) document.getElementById("f-file").value = f;
  document.getElementById("f-outcome").value = "failed";
  renderEpisodeList();
});

async function loadEpisodes() {
  const r = await api("/api/episodes");
  setProblems("episodes", r.problems);
  if (r.rollouts) { state.rollouts = r.rollouts; renderEpisodeList(); return; }
  if (r.episodes.length !== state.episodes.length) {
    state.episodes = r.episodes;
    updateFileOptions();
    renderEpisodeList();
  }
}

function actionJson(record) {
  const a = {};
  if (record.thought) a.thought = record.thought;
  if (record.action) a.action = record.action;
  else a.response = record.response ?? "";
  return JSON.stringify(a, null, 1);
}

function renderSteps(records, turnRewards) {
  if (!records.length) return [el("p", { class: "note", text: "No env steps (the episode ended before its first action)." })];
  const out = [el("div", { class: "field" }, el("b", { text: "instruction" }), el("pre", { text: records[0].instruction }))];
  records.forEach((r, i) => {
    out.push(el("div", { class: "step", "data-step": i },
      el("h4", { text: `step ${i}` + (r.done && r.done !== "running" ? ` · ${r.done}` : "") }),
      r.thought ? el("div", { class: "field" }, el("b", { text: "thought" }), r.thought) : null,
      r.action ? el("div", { class: "field" }, el("b", { text: "tool call" }), el("code", { text: r.action.tool_name }), el("pre", { text: JSON.stringify(r.action.parameters, null, 1) })) : null,
      r.response !== null && r.response !== undefined ? el("div", { class: "field" }, el("b", { text: "response" }), el("pre", { text: r.response })) : null,
      el("div", { class: "field" }, el("b", { text: "observation" }), el("pre", { text: r.observation })),
      el("div", { class: "field" }, el("b", { text: "reward" }), fmt(r.reward, 4),
        r.reward_terms && Object.keys(r.reward_terms).length ? ` (${Object.entries(r.reward_terms).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")})` : "")));
  });
  if (turnRewards && turnRewards.length) out.push(el("div", { class: "field" }, el("b", { text: "turn rewards" }), turnRewards.map((x) => fmt(x)).join(", ")));
  return out;
}

function renderTokens(spans) {
  if (!spans.length) return el("p", { class: "note", text: "No tokens were logged for this episode." });
  const box = el("div", { class: "tokens", id: "tokens" });
  for (const s of spans) {
    if (!s.generated) {
      const text = s.text.length > 400 ? s.text.slice(0, 180) + " … " + s.text.slice(-180) : s.text;
      box.append(el("span", { class: "tok-context", title: `${s.text.length} characters of context` }, text));
      continue;
    }
    const p = Math.exp(s.logprob ?? 0);
    const cls = "tok-gen" + (s.forced ? " tok-forced" : "");
    const bg = s.forced ? "transparent" : `rgba(198, 40, 40, ${(1 - p) * 0.75})`;
    box.append(el("span", { class: cls, style: `background:${bg}`, title: `turn ${s.turn} · log-prob ${fmt(s.logprob, 4)} (p ${fmt(p, 3)})${s.forced ? " · forced by the grammar" : ""}` }, s.text));
  }
  return box;
}

function labelForm(e) {
  const steps = e.records.map((_, i) => el("option", { value: String(i), text: `step ${i}` }));
  const fix = el("textarea", { id: "label-correction", placeholder: "the action the agent should have taken (Agent Template JSON)" });
  const step = el("select", { id: "label-step" }, el("option", { value: "", text: "no correction" }), steps);
  step.addEventListener("change", () => { fix.value = step.value === "" ? "" : actionJson(e.records[Number(step.value)]); });
  const status = el("div", { class: "result", id: "label-status" });
  const save = el("button", { id: "label-save", onclick: async () => {
    const verdict = document.querySelector("input[name=verdict]:checked");
    if (!verdict) { status.textContent = "Choose good or bad."; return; }
    const body = { episode: e.id, verdict: verdict.value, reason: document.getElementById("label-reason").value,
      step: step.value === "" ? null : Number(step.value), corrected_action: step.value === "" ? null : fix.value };
    try {
      const r = await api("/api/labels", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      status.className = "result ok"; status.textContent = `Saved to ${r.saved}.`;
    } catch (err) { status.className = "result bad"; status.textContent = err.message; }
  } }, "Save label");
  return el("fieldset", { id: "label-form" }, el("legend", { text: "Label this episode" }),
    el("label", {}, el("input", { type: "radio", name: "verdict", value: "good", id: "label-good" }), " good "),
    el("label", {}, el("input", { type: "radio", name: "verdict", value: "bad", id: "label-bad" }), " bad "),
    el("div", {}, el("input", { type: "text", id: "label-reason", placeholder: "why" })),
    el("div", {}, "correct ", step), fix, save, status);
}

async function openEpisode(id) {
  state.selected = id;
  renderEpisodeList();
  const detail = document.getElementById("episode-detail");
  detail.replaceChildren(el("p", { class: "note", text: "Loading…" }));
  let e;
  try { e = await api(`/api/episode?id=${encodeURIComponent(id)}`); }
  catch (err) { detail.replaceChildren(el("p", { class: "bad", text: err.message })); return; }
  e.id = id;
  state.episode = e;
  const outcome = e.error ? `env error: ${e.error}` : e.success ? "success" : (e.out_of_context ? "failed (out of context)" : "failed");
  const replayOut = el("div", { class: "result", id: "replay-result" });
  const baselineOut = el("div", { id: "baseline-result" });
  const policyCol = el("div", { id: "policy-steps" }, renderSteps(e.records, e.turn_rewards));
  detail.replaceChildren(...[
    el("h3", { text: `${batchLabel(fileOf(id))} · episode ${e.index}` }),
    el("div", { class: "meta", id: "episode-meta" }, `${outcome} · reward ${fmt(e.reward, 4)} · ${e.turns} turns · seed ${e.seed}` + (e.task ? ` · task ${e.task}` : "") + ` · ended ${e.done}`),
    (e.notes || []).length ? el("div", { class: "note", text: e.notes.join("; ") }) : null,
    el("div", { class: "actions" },
      el("button", { id: "replay-btn", onclick: async () => {
        replayOut.textContent = "Replaying in the sandbox…";
        try {
          const r = await api(`/api/replay?id=${encodeURIComponent(id)}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
          replayOut.className = "result " + (r.reproduced ? "ok" : "bad");
          replayOut.textContent = r.reproduced ? `Reproduced: ${r.steps} steps on ${r.env} (${r.backend}), step for step.`
            : `Diverged at step ${r.step}: ${r.what}`;
        } catch (err) { replayOut.className = "result bad"; replayOut.textContent = err.message; }
      } }, "Replay in the sandbox"),
      el("button", { id: "baseline-btn", onclick: async () => {
        baselineOut.replaceChildren(el("p", { class: "note", text: "Playing the scripted baseline…" }));
        try {
          const b = await api(`/api/baseline?id=${encodeURIComponent(id)}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
          const head = (who, ok, reward) => el("h4", {}, who, " · ", el("span", { class: ok ? "ok" : "bad", text: ok ? "success" : "failed" }), ` · reward ${fmt(reward, 4)}`);
          baselineOut.replaceChildren(el("div", { class: "side-by-side" },
            el("div", {}, head("policy", e.success, e.reward), renderSteps(e.records)),
            el("div", {}, head("scripted baseline", b.success, b.reward), b.error ? el("p", { class: "bad", text: b.error }) : null, renderSteps(b.records))));
          policyCol.hidden = true;
        } catch (err) { baselineOut.replaceChildren(el("p", { class: "bad", text: err.message })); }
      } }, "Baseline on this task and seed")),
    replayOut, baselineOut, policyCol,
    el("h4", { text: "Tokens" }),
    el("div", { class: "legend", text: "Grey: context the policy read. Generated tokens are shaded by how unlikely they were (deeper red: lower probability); dotted underline: forced by the grammar. Hover a token for its log-prob." }),
    renderTokens(e.tokens || []),
    labelForm(e)].filter(Boolean));
}

async function openRollout(id) {
  state.selected = id;
  const detail = document.getElementById("episode-detail");
  let r;
  try { r = await api(`/api/episode?id=${encodeURIComponent(id)}`); }
  catch (err) { detail.replaceChildren(el("p", { class: "bad", text: err.message })); return; }
  detail.replaceChildren(el("h3", { text: `rollout ${r.id}` }),
    el("div", { class: "meta" }, `reward ${fmt(r.reward)} · ${r.calls.length} calls`),
    ...r.calls.map((c) => el("div", { class: "step" },
      el("h4", {}, `call ${c.seq} · HTTP ${c.status} · ${c.prompt_tokens ?? "?"} prompt + ${c.completion_tokens ?? "?"} completion tokens · +${fmt(c.added_ms, 2)} ms`),
      c.break ? el("div", { class: "break", text: `drift: ${c.break.kind.replace("_", " ")} (message ${c.break.message ?? "–"}, ${c.break.common_tokens} tokens in common) — a new training segment starts here` }) : null,
      el("pre", { text: (c.messages.length ? c.messages.slice(-1) : []).map((m) => `${m.role}: ${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`).join("\n") }),
      c.reply ? el("pre", { text: `reply: ${c.reply.content ?? ""}${c.reply.tool_calls ? " " + JSON.stringify(c.reply.tool_calls.map((t) => t.function)) : ""}` }) : null)));
}

// ---------- labels ----------
async function loadLabels() {
  const r = await api("/api/labels");
  setProblems("labels", r.problems);
  document.getElementById("labels-table").tBodies[0].replaceChildren(...r.labels.map((l) => el("tr", {},
    el("td", { text: l.episode }), el("td", {}, el("span", { class: l.verdict === "good" ? "ok" : "bad", text: l.verdict })),
    el("td", { text: l.reason || "" }), el("td", {}, l.corrected_action ? el("code", { text: `step ${l.step}: ${JSON.stringify(l.corrected_action)}` }) : "–"))));
}

// ---------- policy versions ----------
async function loadDecisions() {
  const r = await api("/api/decisions");
  setProblems("decisions", r.problems);
  const good = new Set(["promoted", "replaced"]);
  const bad = new Set(["rolled_back", "refused"]);
  document.getElementById("decisions-table").tBodies[0].replaceChildren(...r.decisions.map((d) => el("tr", {},
    el("td", { text: new Date(d.at_us / 1000).toLocaleString() }),
    el("td", {}, el("span", { class: good.has(d.action) ? "ok" : bad.has(d.action) ? "bad" : "", text: d.action.replace("_", " ") })),
    el("td", { text: d.version }), el("td", { text: d.incumbent }), el("td", { text: d.reason }))));
  document.getElementById("versions-table").tBodies[0].replaceChildren(...r.versions.map((v) => el("tr", {},
    el("td", { text: v.version }), el("td", { text: fmt(v.rollouts) }), el("td", { text: fmt(v.reward_mean) }))));
}

// ---------- start ----------
async function start() {
  try {
    state.summary = await api("/api/summary");
    setProblems("summary", state.summary.problems);
    const run = state.summary.config && state.summary.config.run;
    const train = state.summary.config && state.summary.config.train;
    document.getElementById("source").textContent = `${state.summary.kind}: ${state.summary.path}` +
      (run ? ` · env ${run.env} · model ${run.model}` : "") + (train ? ` · ${train.algo}` : "") +
      (state.summary.traces ? ` · its proxy traces: sandgym view ${state.summary.traces}` : "");
    document.getElementById("labels-path").textContent = state.summary.labels;
    if (state.summary.kind !== "run") showTab("episodes");
  } catch (err) { setProblems("summary", [err.message]); }
  await refresh();
  setInterval(refresh, 3000);
}

async function refresh() {
  try { await loadMetrics(); } catch (err) { setProblems("metrics", [err.message]); }
  try { await loadEpisodes(); } catch (err) { setProblems("episodes", [err.message]); }
  document.body.dataset.ready = "1";
}

start();
