// The dashboard in a real browser: headless Chromium, driven by playwright-core, opens
// `sandgym view` on a finished run and checks what a person would: the curves have one point
// per iteration, the failed episodes of the last evaluation are two clicks away, an episode
// opens with its steps and tokens, it replays in the sandbox, the baseline plays beside it,
// and a label reaches labels.jsonl. Screenshots go to OUT_DIR.
//
//   node view.mjs URL RUN_DIR OUT_DIR
//
// Expected figures are read from the run's files here, independently of the server.
import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";

const launch = () => chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});

// `node view.mjs --traces URL OUT_DIR BREAKS`: the page over a trace store — its rollouts, one
// opened, its drift breaks marked.
if (process.argv[2] === "--traces") {
  const [, , , url, outDir, breaks] = process.argv;
  fs.mkdirSync(outDir, { recursive: true });
  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1300, height: 800 } });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForSelector("tr.episode-row");
    const rows = await page.$$eval("tr.episode-row", (rs) => rs.length);
    if (rows !== 1) throw new Error(`check failed: one rollout listed (got ${rows})`);
    await page.click("tr.episode-row");
    await page.waitForSelector("#episode-detail .step");
    const marked = await page.$$eval("#episode-detail .break", (b) => b.map((x) => x.textContent));
    if (marked.length !== Number(breaks)) throw new Error(`check failed: ${breaks} breaks marked (got ${marked.length})`);
    if (!marked.every((t) => /new training segment/.test(t))) throw new Error(`check failed: breaks say so: ${marked}`);
    console.log(`ok: the rollout's ${breaks} drift breaks are marked: ${marked.join(" | ")}`);
    await page.screenshot({ path: path.join(outDir, "traces.png") });
    if (errors.length) throw new Error(`check failed: script errors ${errors}`);
  } finally {
    await browser.close();
  }
  console.log("browser test passed");
  process.exit(0);
}

const [url, runDir, outDir] = process.argv.slice(2);
if (!url || !runDir || !outDir) {
  console.error("usage: node view.mjs URL RUN_DIR OUT_DIR | node view.mjs --traces URL OUT_DIR BREAKS");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

function jsonl(file) {
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

const iterations = jsonl(path.join(runDir, "metrics.jsonl")).length;
const evalsFile = path.join(runDir, "eval.jsonl");
const evaluations = fs.existsSync(evalsFile) ? jsonl(evalsFile).length : 0;
const episodeFiles = fs.readdirSync(path.join(runDir, "episodes")).filter((f) => f.endsWith(".jsonl")).sort();
const rank = (f) => {
  const m = /(eval|closing)-0*(\d+)\.jsonl$/.exec(f);
  return m ? Number(m[2] || 0) * 2 + (m[1] === "closing" ? 1 : 0) : -1;
};
const lastEval = episodeFiles.filter((f) => rank(f) >= 0).sort((a, b) => rank(a) - rank(b)).pop();
const lastEvalFailed = jsonl(path.join(runDir, "episodes", lastEval)).filter((e) => !e.success).length;
const labelsFile = path.join(runDir, "labels.jsonl");
const labelsBefore = fs.existsSync(labelsFile) ? jsonl(labelsFile).length : 0;

const browser = await launch();
const errors = [];
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("pageerror", (e) => errors.push(String(e)));
  // Script errors count; a failed request does not (the refused label below is one, on purpose).
  page.on("console", (m) => { if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) errors.push(m.text()); });
  page.on("response", (r) => { if (r.status() === 404) errors.push(`404 ${r.url()}`); });
  await page.goto(url);
  await page.waitForSelector("body[data-ready='1']", { timeout: 30000 });

  // Curves: one point per iteration on each, the evaluation's points on the success chart.
  await page.waitForSelector("#chart-reward_mean canvas");
  const charts = await page.$$eval(".chart", (cs) => cs.map((c) => ({
    id: c.id, points: Number(c.dataset.points), series: Number(c.dataset.series), canvas: !!c.querySelector("canvas"),
  })));
  check(charts.length === 8, `8 charts drawn (got ${charts.length})`);
  check(charts.every((c) => c.canvas), "every chart has a canvas");
  const reward = charts.find((c) => c.id === "chart-reward_mean");
  check(reward.points === iterations, `reward curve has ${iterations} points (got ${reward.points})`);
  const closingFile = path.join(runDir, "closing_eval.json");
  const closing = fs.existsSync(closingFile) ? JSON.parse(fs.readFileSync(closingFile, "utf8")) : null;
  const wantSeries = 1 + (evaluations > 0 ? 1 : 0) + (closing && closing.policy ? 1 : 0) + (closing && closing.baseline ? 1 : 0);
  const success = charts.find((c) => c.id === "chart-success_rate");
  check(success.series === wantSeries, `success chart: sampled, evaluation and closing series (${wantSeries}, got ${success.series})`);
  await page.screenshot({ path: path.join(outDir, "curves.png") });

  // Two clicks from the curves: the failed episodes of the last evaluation.
  await page.click("#failed-last-eval");
  await page.waitForSelector("#episodes:not([hidden])");
  const rows = await page.$$eval("tr.episode-row", (rs) => rs.map((r) => r.dataset.id));
  check(rows.length === lastEvalFailed, `${lastEvalFailed} failed episodes of ${lastEval} listed (got ${rows.length})`);
  check(rows.every((id) => id.startsWith(`episodes/${lastEval}#`)), "all from the last evaluation");

  // Open one (a failed one if any, else the first of all).
  if (rows.length === 0) {
    await page.selectOption("#f-outcome", "");
  }
  const first = await page.$eval("tr.episode-row", (r) => r.dataset.id);
  await page.click(`tr.episode-row[data-id="${first}"]`);
  await page.waitForSelector("#episode-meta");
  const steps = await page.$$eval("#policy-steps .step", (s) => s.length);
  const logged = jsonl(path.join(runDir, first.split("#")[0]))[Number(first.split("#")[1])];
  check(steps === logged.records.length, `the episode shows its ${logged.records.length} steps (got ${steps})`);
  const generated = await page.$$eval("#tokens .tok-gen", (t) => t.length);
  const loggedGenerated = logged.tokens.filter((t) => t.generated).length;
  check(generated === loggedGenerated, `its ${loggedGenerated} generated tokens are shown (got ${generated})`);
  await page.screenshot({ path: path.join(outDir, "episode.png") });

  // Replay in the sandbox: the recorded actions reproduce the episode.
  await page.click("#replay-btn");
  await page.waitForFunction(() => /Reproduced|Diverged|error|failed/i.test(document.querySelector("#replay-result").textContent), null, { timeout: 60000 });
  const replay = await page.textContent("#replay-result");
  check(replay.startsWith("Reproduced"), `replay: ${replay}`);

  // The baseline beside it, on the same task and seed.
  await page.click("#baseline-btn");
  await page.waitForSelector("#baseline-result .side-by-side", { timeout: 60000 });
  const columns = await page.$$eval("#baseline-result .side-by-side > div", (d) => d.length);
  check(columns === 2, "policy and baseline side by side");
  await page.screenshot({ path: path.join(outDir, "side-by-side.png"), fullPage: false });

  // Label it bad with a correction at step 0 (the action prefilled, edited to another guess).
  await page.check("#label-bad");
  await page.fill("#label-reason", "guessed without halving the range");
  await page.selectOption("#label-step", "0");
  const prefilled = await page.inputValue("#label-correction");
  check(prefilled.includes("tool_name") || prefilled.includes("response"), "the correction is prefilled with the step's action");
  const corrected = { thought: "halve the range", action: { tool_name: "guess", parameters: { number: 50 } } };
  await page.fill("#label-correction", JSON.stringify(corrected));
  await page.click("#label-save");
  await page.waitForFunction(() => document.querySelector("#label-status").textContent.length > 0);
  const status = await page.textContent("#label-status");
  check(status.startsWith("Saved"), `label saved: ${status}`);
  const labels = jsonl(labelsFile);
  check(labels.length === labelsBefore + 1, "labels.jsonl has one more line");
  const label = labels[labels.length - 1];
  check(label.episode === first && label.verdict === "bad" && label.step === 0, "the label names the episode, verdict and step");
  check(label.corrected_action.action.parameters.number === 50, "the label keeps the corrected action");

  // A bad correction is refused with a message, and nothing is written.
  await page.fill("#label-correction", '{"action": {"tool_name": "guess", "parameters": {"number": 5000}}}');
  await page.click("#label-save");
  await page.waitForFunction(() => !document.querySelector("#label-status").textContent.startsWith("Saved"));
  const refused = await page.textContent("#label-status");
  check(/maximum/.test(refused), `an out-of-range correction is refused: ${refused}`);
  check(jsonl(labelsFile).length === labelsBefore + 1, "and not written");

  // The labels tab lists it.
  await page.click("#tab-labels");
  await page.waitForSelector("#labels-table tbody tr");
  await page.screenshot({ path: path.join(outDir, "labels.png") });
  check(errors.length === 0, `no script errors (${errors.join("; ")})`);
} finally {
  await browser.close();
}
console.log("browser test passed");
