// The live block of attnbook.live: a seq2seq Transformer translating in the reader's browser.
// attnbook.live.LiveBlock inlines this file into a <script type="module"> followed by
// mount(ID); the block's data (vocabularies, sizes, one example translated in advance by
// PyTorch) are the JSON of the <script id="ID-config"> beside it. The example is drawn at
// once; onnxruntime-web and the model file load only when the reader asks for a translation,
// from the built book (data-content_root on <html>, set by Sphinx): RUNTIME and MODEL there.
// Tests read root.attnbook (the shown result and the timings) and root.dataset.state.
//
// Every word the block shows goes through _(message, {name: value}): on a page in
// another language (<html lang>, set by Sphinx: "zh-CN" on the Chinese edition) it is looked up
// in the config's messages (attnbook.live, compiled from locale/<lang>/LC_MESSAGES/live.po by
// tests/live_catalog.py, which finds the messages here by their _( and N_( calls); {name}
// marks a value. English is the source and is shown as written.

const RUNTIME_FILE = "ort.wasm.min.mjs";
let CATALOG = null; // the page language's messages (mount sets it from the config)
function _(message, values = {}) {
  const text = (CATALOG && CATALOG[message]) || message;
  return text.replace(/\{(\w+)\}/g, (m, name) => (name in values ? String(values[name]) : m));
}
const N_ = (message) => message; // a message translated where it is shown
function pageLanguage() {
  const lang = (document.documentElement.lang || "en").replace("-", "_");
  return lang.toLowerCase().startsWith("zh") ? "zh_CN" : lang;
}
const KINDS = {
  cross: [
    N_("cross-attention: output → source"), N_("source character (key)"),
    N_("output written (query)"),
  ],
  encoder_self: [
    N_("encoder self-attention"), N_("source character (key)"), N_("source character (query)"),
  ],
  decoder_self: [
    N_("decoder self-attention (masked)"), N_("decoder input (key)"), N_("output written (query)"),
  ],
};
const TITLE = N_("The dates Transformer, running in your browser");
const NOTEBOOK = N_("Translating another date runs the model in your browser with onnxruntime-web, which the book's web pages serve together with the model file; a running notebook (JupyterLab, Colab) has neither. Here, translate in Python instead: the block's translate method, block.translate(\"your date\"), draws this same view computed by PyTorch.");

const FILE = N_("This page was opened as a file (file://), and browsers do not let such a page load the runtime and the model. Serve the book's folder instead, for example with python -m http.server --directory _build/html, and open the page at http://localhost:8000.");

// one runtime session per page and model file, shared by the page's blocks
const sessions = (window.__attnbookLive = window.__attnbookLive || new Map());

class Refusal extends Error {} // a message for the reader, not a fault of the page

function h(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
}

const shown = (t) => (t === " " ? "␣" : t);
const hex = (c) => c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
const quote = (c) => `${JSON.stringify(c)} (U+${hex(c)})`;

// The message for text the model cannot read, or null (attnbook.live.check_text says the same).
function problem(cfg, text) {
  if (!text.trim()) return _("The input is empty: type a date to translate.");
  const chars = [...text];
  if (chars.length > cfg.max_len)
    return _("The input has {n} characters; the model reads at most {max} (the length of its positional table).",
      { n: chars.length, max: cfg.max_len });
  const known = new Set(cfg.src_itos.slice(4));
  const unknown = [...new Set(chars.filter((c) => !known.has(c)))];
  if (unknown.length) {
    const values = {
      unknown: unknown.map(quote).join(", "),
      known: [...known].filter((c) => c !== " ").sort().join(""),
    };
    return known.has(" ")
      ? _("The model does not know {unknown}: it reads only the characters of its training data: the space and {known}", values)
      : _("The model does not know {unknown}: it reads only the characters of its training data: {known}", values);
  }
  return null;
}

function bookRoot() {
  const root = document.documentElement.dataset.content_root;
  return root === undefined ? null : new URL(root, document.baseURI);
}

async function openModel(cfg, base) {
  const sidecar = new URL(cfg.sidecar, base);
  let response;
  try {
    response = await fetch(sidecar);
  } catch (e) {
    throw new Refusal(_("Could not download the model's description {url}: {error}.",
      { url: sidecar, error: e.message }));
  }
  if (!response.ok)
    throw new Refusal(_("This build of the book has no model file ({file}: HTTP {status}). `make book` writes it (its `live-model` step).",
      { file: cfg.sidecar, status: response.status }));
  const info = await response.json();
  const weights = info.info && info.info.weights;
  if (weights !== cfg.weights || info.src_vocab.itos.join("\n") !== cfg.src_itos.join("\n"))
    throw new Refusal(_("The model file on this page (weights {weights}) is not the model this block's example came from (weights {expected}): rebuild the book (make book).",
      { weights, expected: cfg.weights }));
  let ort;
  try {
    ort = await import(new URL(cfg.runtime + RUNTIME_FILE, base).href);
  } catch (e) {
    throw new Refusal(_("Could not load onnxruntime-web from {url}: {error}.",
      { url: cfg.runtime, error: e.message }));
  }
  ort.env.wasm.wasmPaths = new URL(cfg.runtime, base).href;
  ort.env.wasm.numThreads = 1; // threads need cross-origin isolation, which static hosting lacks
  ort.env.logLevel = "error";
  const session = await ort.InferenceSession.create(new URL(cfg.model, base).href, {
    executionProviders: ["wasm"],
  });
  return { ort, session, bytes: info.bytes };
}

async function runtime(cfg) {
  const base = bookRoot();
  if (!base) throw new Refusal(_(NOTEBOOK));
  if (location.protocol === "file:") throw new Refusal(_(FILE));
  const key = new URL(cfg.model, base).href;
  if (!sessions.has(key)) sessions.set(key, openModel(cfg, base));
  try {
    return await sessions.get(key);
  } catch (e) {
    sessions.delete(key); // the next click tries again
    throw e;
  }
}

// [layer][head][query][key] from an output of dims (layers, 1, heads, queries, keys)
function nested(t) {
  const [L, , H, Q, K] = t.dims;
  const out = [];
  for (let l = 0; l < L; l++) {
    const heads = [];
    for (let hd = 0; hd < H; hd++) {
      const rows = [];
      for (let q = 0; q < Q; q++) {
        const at = ((l * H + hd) * Q + q) * K;
        rows.push(Array.from(t.data.subarray(at, at + K)));
      }
      heads.push(rows);
    }
    out.push(heads);
  }
  return out;
}

// Greedy decoding, as attnbook.decode.greedy_decode: the graph runs on <bos> and the tokens so
// far, and the last position's most likely token is appended, until <eos> or max_output steps.
// The last run (its input: <bos> and the output but its last token) gives every attention.
async function translate(cfg, rt, text) {
  const { ort, session } = rt;
  const stoi = new Map(cfg.src_itos.map((s, i) => [s, i]));
  const ids = [...text].map((c) => stoi.get(c));
  const int64 = (xs) => BigInt64Array.from(xs, (x) => BigInt(x));
  const src = new ort.Tensor("int64", int64(ids), [1, ids.length]);
  const { bos, eos } = cfg.specials;
  const tokens = [bos];
  let out = null;
  for (let step = 0; step < cfg.max_output; step++) {
    const tgt = new ort.Tensor("int64", int64(tokens), [1, tokens.length]);
    out = await session.run({ src, tgt });
    const [, T, V] = out.logits.dims;
    const row = out.logits.data.subarray((T - 1) * V, T * V);
    let best = 0;
    for (let v = 1; v < V; v++) if (row[v] > row[best]) best = v; // the first maximum
    tokens.push(best);
    if (best === eos) break;
  }
  const itos = cfg.tgt_itos;
  const [, T, V] = out.logits.dims;
  const top = [];
  for (let t = 0; t < T; t++) {
    const row = Array.from(out.logits.data.subarray(t * V, (t + 1) * V));
    const m = Math.max(...row);
    const e = row.map((x) => Math.exp(x - m));
    const z = e.reduce((a, b) => a + b, 0);
    const order = e.map((x, i) => [i, x / z]).sort((a, b) => b[1] - a[1]);
    top.push(order.slice(0, 3).map(([i, p]) => [itos[i], p]));
  }
  const written = tokens.slice(1);
  let translation = "";
  for (const i of written) {
    if (i === eos) break;
    if (i !== bos && i !== 0) translation += itos[i];
  }
  return {
    text,
    source: [...text],
    reads: tokens.slice(0, -1).map((i) => itos[i]),
    writes: written.map((i) => itos[i]),
    translation,
    finished: written[written.length - 1] === eos,
    attention: {
      cross: nested(out.cross_attention),
      encoder_self: nested(out.encoder_self_attention),
      decoder_self: nested(out.decoder_self_attention),
    },
    top,
  };
}

function colour(w) {
  // white to dark blue, linear in the weight
  const a = [247, 251, 255], b = [8, 48, 107];
  return `rgb(${a.map((x, i) => Math.round(x + (b[i] - x) * w)).join(",")})`;
}

function mount(id) {
  const root = document.getElementById(id);
  if (!root || root.dataset.mounted) return;
  root.dataset.mounted = "1";
  const cfg = JSON.parse(document.getElementById(`${id}-config`).textContent);
  CATALOG = (cfg.messages || {})[pageLanguage()] || null;
  const st = { result: cfg.example, kind: "cross", layer: 0, head: -1, step: 0, timer: null };
  const times = [];
  root.attnbook = { cfg, times, get result() { return st.result; } };

  const input = h("input", { type: "text", class: "al-input", spellcheck: "false",
    "aria-label": _("text to translate"), autocomplete: "off" });
  input.value = cfg.example.text;
  const button = h("button", { type: "submit", class: "al-button" }, _("Translate"));
  const message = h("div", { class: "al-message", role: "alert" });
  const status = h("div", { class: "al-status" });
  const output = h("div", { class: "al-output" });
  const option = (value, text) => { const o = h("option", {}, text); o.value = value; return o; };
  const kind = h("select", { class: "al-kind", "aria-label": _("attention") },
    ...Object.entries(KINDS).map(([k, v]) => option(k, _(v[0]))));
  const layer = h("select", { class: "al-layer", "aria-label": _("layer") },
    ...Array.from({ length: cfg.layers }, (x, l) => option(l, _("layer {n}", { n: l + 1 }))));
  const head = h("select", { class: "al-head", "aria-label": _("head") },
    option(-1, _("mean of {n} heads", { n: cfg.heads })),
    ...Array.from({ length: cfg.heads }, (x, k) => option(k, _("head {n}", { n: k + 1 }))));
  const map = h("div", { class: "al-map" });
  const slider = h("input", { type: "range", class: "al-step", min: "0", step: "1",
    "aria-label": _("decoder step") });
  const stepText = h("div", { class: "al-steptext" });
  const back = h("button", { type: "button", class: "al-back",
    "aria-label": _("previous step") }, "◀");
  const next = h("button", { type: "button", class: "al-next", "aria-label": _("next step") },
    "▶");
  const play = h("button", { type: "button", class: "al-play" }, _("play the decoder"));
  const form = h("form", { class: "al-form" }, input, button);

  root.querySelector(".attnbook-live-static")?.remove();
  root.append(
    h("div", { class: "al-title" }, _(cfg.title || TITLE)),
    form, message, output, status,
    h("div", { class: "al-controls" }, kind, layer, head),
    map,
    h("div", { class: "al-stepper" }, back, slider, next, play),
    stepText,
  );
  status.textContent = bookRoot()
    ? _("Translated in advance by PyTorch. Translate runs the model here: the first click loads onnxruntime-web and the model file.")
    : _("Translated in advance by PyTorch. In a notebook, the block's translate method translates another date: block.translate(\"your date\").");

  function say(text) {
    message.textContent = text || "";
    message.hidden = !text;
  }

  function drawOutput() {
    const r = st.result;
    output.replaceChildren(h("span", { class: "al-arrow" }, `${r.text} → `),
      ...r.writes.map((w, t) => {
        const when = t === st.step ? "al-now" : t < st.step ? "al-done" : "al-later";
        return h("span", { class: when }, w === "<eos>" ? "⟨eos⟩" : w);
      }));
    if (!r.finished)
      output.append(h("em", {}, _(" (stopped after {n} steps without <eos>)", { n: r.writes.length })));
  }

  function drawStep() {
    const r = st.result, t = st.step;
    const [best, ...others] = r.top[t];
    const read = r.reads[t] === "<bos>" ? "<bos>" : `“${r.reads[t]}”`;
    stepText.textContent = _("Step {t} of {n}: reading {read}, the decoder writes “{best}” (probability {p}%; then {others}).", {
      t: t + 1, n: r.writes.length, read, best: best[0], p: (100 * best[1]).toFixed(1),
      others: others.map(([w, p]) => `“${w}” ${(100 * p).toFixed(1)}%`).join(_(", ")),
    });
    slider.max = String(r.writes.length - 1);
    slider.value = String(t);
  }

  function weights() {
    const a = st.result.attention[st.kind][st.layer];
    if (st.head >= 0) return a[st.head];
    return a[0].map((row, q) => row.map((x, k) => a.reduce((s, hd) => s + hd[q][k], 0) / a.length));
  }

  function drawMap() {
    const r = st.result;
    const [, keyName, queryName] = KINDS[st.kind];
    const keys = st.kind === "decoder_self" ? r.reads : r.source;
    const queries = st.kind === "encoder_self" ? r.source : r.writes;
    const w = weights();
    const width = Math.max(240, (root.clientWidth || 600) - 80);
    // cells (and the 1 px gaps between them) shrink to fit the column; below 7 px the
    // characters no longer fit their cells, and small cells go without gaps
    const room = Math.floor(width / keys.length);
    const gap = room >= 8 ? 1 : 0;
    const cell = Math.max(1, Math.min(24, room - gap));
    const font = Math.max(7, Math.min(12, cell - 4));
    const label = (t) => (cell >= 7 ? shown(t) : "");
    const grid = h("div", { class: "al-grid" });
    grid.style.gridTemplateColumns = `auto repeat(${keys.length}, ${cell}px)`;
    grid.style.gap = `${gap}px`;
    grid.style.fontSize = `${font}px`;
    grid.append(h("div", { class: "al-corner" }));
    for (const k of keys) grid.append(h("div", { class: "al-key" }, label(k)));
    queries.forEach((q, i) => {
      const now = st.kind !== "encoder_self" && i === st.step;
      grid.append(h("div", { class: now ? "al-query al-row-now" : "al-query" }, label(q)));
      w[i].forEach((x, j) => {
        const c = h("div", { class: now ? "al-cell al-row-now" : "al-cell",
          title: `${shown(q)} → ${shown(keys[j])}: ${x.toFixed(3)}` });
        c.style.background = colour(x);
        c.style.height = `${cell}px`;
        grid.append(c);
      });
    });
    map.replaceChildren(
      h("div", { class: "al-axis" },
        _("columns: {keys}; rows: {queries}; weight 0 white, 1 dark blue",
          { keys: _(keyName), queries: _(queryName) }) +
        (cell >= 7 ? "" : _(" (too many characters to label; hover a cell to read it)"))),
      grid);
  }

  function draw() {
    drawOutput();
    drawStep();
    drawMap();
  }

  function show(result) {
    st.result = result;
    st.step = result.writes.length - 1;
    draw();
  }

  function stop() {
    if (st.timer) clearInterval(st.timer);
    st.timer = null;
    play.textContent = _("play the decoder");
  }

  function go(t) {
    st.step = Math.max(0, Math.min(st.result.writes.length - 1, t));
    draw();
  }

  kind.addEventListener("change", () => { st.kind = kind.value; drawMap(); });
  layer.addEventListener("change", () => { st.layer = Number(layer.value); drawMap(); });
  head.addEventListener("change", () => { st.head = Number(head.value); drawMap(); });
  slider.addEventListener("input", () => { stop(); go(Number(slider.value)); });
  back.addEventListener("click", () => { stop(); go(st.step - 1); });
  next.addEventListener("click", () => { stop(); go(st.step + 1); });
  play.addEventListener("click", () => {
    if (st.timer) return stop();
    go(0);
    play.textContent = _("pause");
    const forward = () => (st.step + 1 < st.result.writes.length ? go(st.step + 1) : stop());
    st.timer = setInterval(forward, 700);
  });
  input.addEventListener("input", () => say(""));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    stop();
    const text = input.value;
    const why = problem(cfg, text);
    if (why) {
      root.dataset.state = "refused";
      return say(why);
    }
    say("");
    const start = performance.now();
    const first = !sessions.size;
    button.disabled = true;
    root.dataset.state = "translating";
    status.textContent = first ? _("Loading onnxruntime-web and the model…") : _("Translating…");
    try {
      const rt = await runtime(cfg);
      const loaded = performance.now();
      const result = await translate(cfg, rt, text);
      const ms = performance.now() - start;
      times.push({ ms, load_ms: loaded - start, first });
      show(result);
      const took = { ms: (ms - (loaded - start)).toFixed(0), s: ((loaded - start) / 1000).toFixed(1) };
      status.textContent = first
        ? _("Translated in your browser in {ms} ms (the runtime and the model loaded in {s} s) by onnxruntime-web.", took)
        : _("Translated in your browser in {ms} ms by onnxruntime-web.", took);
      root.dataset.state = "done";
    } catch (e) {
      root.dataset.state = e instanceof Refusal ? "refused" : "error";
      say(e instanceof Refusal ? e.message : _("The translation failed: {error}", { error: e.message || e }));
      status.textContent = _("Showing the last translation.");
    } finally {
      button.disabled = false;
    }
  });

  say("");
  show(cfg.example);
  root.dataset.state = "example";
  if (window.ResizeObserver) {
    let last = root.clientWidth;
    new ResizeObserver(() => {
      if (root.clientWidth !== last) {
        last = root.clientWidth;
        drawMap();
      }
    }).observe(root);
  }
}
