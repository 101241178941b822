// The memory inspector. Everything shown comes from the API and is hostile: it enters the page only
// as text nodes and attribute values (never innerHTML), and the page's CSP allows no inline script.
// Texts arrive whole; views shorten them at word boundaries only. Rounds are shown from 1.
'use strict';
const SVG = 'http://www.w3.org/2000/svg';
const OUTCOMES = ['yes', 'no', 'uncertain'];
const GRAVITY = 1.0;
const FACTOR = 150;
const COLOUR = {yes: '#1a7f37', no: '#cf222e', uncertain: '#8c959f'};
const STATUS_HEADINGS = [
  ['admitted', 'Verified: admitted after trials against matched controls'],
  ['manual', 'Admitted by hand: a person said so, not verified by trials'],
  ['trial', 'Under trial: shown to test whether it helps, not yet verified'],
  ['candidate', 'Candidates: proposed, not shown yet'],
  ['quarantined', 'Quarantined: carries page text that addresses the agent; never shown, only a person can admit it'],
  ['rejected', 'Rejected or retired'],
];

function h(tag, attrs, ...children) {
  const el = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const num = (v, digits) => Number.isFinite(Number(v)) ? Number(v).toFixed(digits) : '?';
const int = v => Number.isInteger(Number(v)) ? String(Number(v)) : '?';
// '1 step', '2 steps': a count and its noun, plural unless 1 (as the CLI and the report say it)
const count = (n, noun) => `${int(n)} ${Number(n) === 1 ? noun : noun + 's'}`;
const signed = v => Number.isFinite(Number(v)) ? (Number(v) >= 0 ? '+' : '') + Number(v).toFixed(2) : '?';

// Shorten at a word boundary, never inside a word (unless one word is longer than the limit).
function shorten(text, limit) {
  const s = String(text ?? '');
  if (s.length <= limit) return s;
  let cut = s.lastIndexOf(' ', limit);
  if (cut < limit / 2) cut = limit;
  return s.slice(0, cut).trimEnd() + ' …';
}

function key() { return sessionStorage.getItem('guimem-key') || ''; }
function headers() { return key() ? {'Authorization': 'Bearer ' + key()} : {}; }
async function get(path) {
  const r = await fetch(path, {headers: headers()});
  if (!r.ok) {
    let message = r.statusText;
    try { message = (await r.json()).message; } catch (e) { /* not JSON */ }
    throw new Error(path + ': ' + r.status + ' ' + message);
  }
  return r.json();
}
function fill(id, ...children) {
  const el = document.getElementById(id);
  el.replaceChildren(...children.flat());
  el.classList.remove('muted');
  return el;
}

// ---- detail panel (an item, an edge, a node) ----
function showDetail(title, pairs) {
  const body = document.getElementById('detail-body');
  body.replaceChildren(h('h3', {}, title), h('dl', {}, pairs.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
  document.getElementById('detail').hidden = false;
}
async function showItem(id) {
  const row = document.getElementById('item-' + id);
  if (row) {
    row.scrollIntoView({block: 'center'});
    row.classList.add('flash');
    setTimeout(() => row.classList.remove('flash'), 1500);
  }
  try {
    const d = await get('/v1/items/' + encodeURIComponent(id));
    const origin = String(d.origin || 'action') + (d.imported === true ? ', imported (untrusted until admitted here)' : '');
    const page = Array.isArray(d.page) && d.page.length
      ? [['page text (data)', h('ul', {}, d.page.map(s => h('li', {class: 'page-text'}, '«' + String(s) + '»')))]] : [];
    const held = d.quarantine ? [['quarantined', String(d.quarantine)]] : [];
    showDetail(d.kind + ' ' + d.id, [['status', d.status], ['version', 'v' + int(d.version)],
                                      ['words by', origin], ...page, ...held,
                                      ['text', d.summary], ...(d.code ? [['code', h('pre', {}, d.code)]] : [])]);
  } catch (err) {
    showDetail(String(id), [['not in this memory', err.message]]);
  }
}
function itemLink(id, trial) {
  const b = h('button', {type: 'button', class: 'item-link', 'data-item': id, title: 'show item ' + id}, id);
  b.addEventListener('click', () => showItem(id));
  return trial ? [b, h('span', {class: 'trial-tag'}, ' (under trial)')] : b;
}

// ---- graph: force layout, then labels placed greedily where they overlap nothing ----
function layout(nodes, edges, W, H) {
  const n = nodes.length, index = new Map(nodes.map((nd, i) => [nd.id, i]));
  const p = nodes.map((_, i) => {  // deterministic start: a golden-angle spiral
    const r = Math.sqrt((i + 0.5) / n) * 0.45, a = i * 2.399963;
    return [W / 2 + r * W * Math.cos(a), H / 2 + r * H * Math.sin(a)];
  });
  const links = edges.map(e => [index.get(e.source), index.get(e.target)])
    .filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
  const k = Math.sqrt(W * H / Math.max(n, 1)) * 0.9;
  const gravity = GRAVITY * n * k * k / Math.pow(0.42 * W, 2);  // balances the repulsion near the border
  let t = W / 8;
  for (let it = 0; it < 300; it++) {
    const d = p.map(() => [0, 0]);
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        let dx = p[i][0] - p[j][0], dy = p[i][1] - p[j][1];
        let dist = Math.hypot(dx, dy) || 0.01;
        const f = k * k / dist;
        dx /= dist; dy /= dist;
        d[i][0] += dx * f; d[i][1] += dy * f; d[j][0] -= dx * f; d[j][1] -= dy * f;
      }
    }
    for (const [a, b] of links) {
      let dx = p[a][0] - p[b][0], dy = p[a][1] - p[b][1];
      const dist = Math.hypot(dx, dy) || 0.01, f = dist * dist / k;
      dx /= dist; dy /= dist;
      d[a][0] -= dx * f; d[a][1] -= dy * f; d[b][0] += dx * f; d[b][1] += dy * f;
    }
    for (let i = 0; i < n; i++) {  // gravity keeps separate components near the middle, not piled on the border
      d[i][0] -= (p[i][0] - W / 2) * gravity;
      d[i][1] -= (p[i][1] - H / 2) * gravity * W / H;
      const len = Math.hypot(d[i][0], d[i][1]) || 1, step = Math.min(len, t);
      p[i][0] = Math.min(W - 30, Math.max(30, p[i][0] + d[i][0] / len * step));
      p[i][1] = Math.min(H - 20, Math.max(20, p[i][1] + d[i][1] / len * step));
    }
    t = Math.max(t * 0.985, 1);
  }
  return p;
}

function overlaps(a, b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

function placeLabels(svg, items) {
  // items: [{text (svg text element), x, y, degree}]; nodes are obstacles too
  const placed = items.map(it => ({x: it.x - 7, y: it.y - 7, w: 14, h: 14}));
  const order = [...items.keys()].sort((a, b) => items[b].degree - items[a].degree);
  for (const i of order) {
    const it = items[i], w = it.text.getComputedTextLength() + 4, hgt = 14;
    const spots = [[it.x + 9, it.y - 10], [it.x - 9 - w, it.y - 10], [it.x - w / 2, it.y - 24],
                   [it.x - w / 2, it.y + 8], [it.x + 9, it.y + 2], [it.x - 9 - w, it.y + 2]];
    const free = spots.map(([x, y]) => ({x, y, w, h: hgt})).find(box =>
      box.x >= 0 && box.y >= 0 && box.x + box.w <= svg.viewBox.baseVal.width &&
      box.y + box.h <= svg.viewBox.baseVal.height &&
      !placed.some(other => overlaps(box, other)));
    if (free) {
      it.text.setAttribute('x', (free.x + 2).toFixed(1));
      it.text.setAttribute('y', (free.y + 11).toFixed(1));
      placed.push(free);
    } else {
      it.text.setAttribute('x', (it.x + 9).toFixed(1));
      it.text.setAttribute('y', (it.y + 4).toFixed(1));
      it.text.classList.add('hidden');
    }
  }
}

function drawGraph(g) {
  if (!g.nodes.length) return;
  const n = g.nodes.length;
  const W = Math.max(900, Math.round(FACTOR * Math.sqrt(n))), H = Math.max(520, Math.round(W * 0.62));
  const pos = layout(g.nodes, g.edges, W, H), at = new Map(g.nodes.map((nd, i) => [nd.id, pos[i]]));
  const degree = new Map(g.nodes.map(nd => [nd.id, 0]));
  for (const e of g.edges) {
    degree.set(e.source, (degree.get(e.source) || 0) + 1);
    degree.set(e.target, (degree.get(e.target) || 0) + 1);
  }
  const svg = h('svg:svg', {id: 'graph-svg', viewBox: `0 0 ${W} ${H}`, width: W, height: H});
  const defs = h('svg:defs', {}, OUTCOMES.map(o => h('svg:marker', {id: 'arrow-' + o, viewBox: '0 0 10 10', refX: 16,
    refY: 5, markerWidth: 5, markerHeight: 5, orient: 'auto'}, h('svg:path', {d: 'M0,0L10,5L0,10z',
    class: 'arrow', fill: COLOUR[o]}))));
  svg.append(defs);
  const edgeLayer = h('svg:g', {}), nodeLayer = h('svg:g', {}), labelLayer = h('svg:g', {});
  g.edges.forEach((e, i) => {
    const [x1, y1] = at.get(e.source) || [W / 2, H / 2], [x2, y2] = at.get(e.target) || [W / 2, H / 2];
    const bend = 14 * ((i % 3) - 1);  // parallel edges between one pair fan out
    const mx = (x1 + x2) / 2 - (y2 - y1) * bend / 100, my = (y1 + y2) / 2 + (x2 - x1) * bend / 100;
    const d = e.source === e.target ? `M${x1},${y1} c 24,-34 48,0 0,9` : `M${x1},${y1} Q${mx},${my} ${x2},${y2}`;
    const ok = OUTCOMES.includes(String(e.success)) ? String(e.success) : 'uncertain';
    const hit = h('svg:path', {class: 'edge-hit', d, 'data-edge': e.id});
    const line = h('svg:path', {class: `edge success-${ok}`, d, 'data-edge': e.id, 'marker-end': `url(#arrow-${ok})`});
    const show = () => {
      svg.querySelectorAll('.edge.selected').forEach(el => el.classList.remove('selected'));
      line.classList.add('selected');
      showDetail('edge ' + e.id, [['subgoal', e.text], ['effect', e.effect], ['outcome', ok],
                                  ['behaviour', (e.avoid ? 'avoid: ' : '') + (e.behaviour || '')], ['task', e.task],
                                  ['from → to', `${e.source} → ${e.target}`]]);
    };
    hit.addEventListener('click', show);
    line.addEventListener('click', show);
    hit.append(h('svg:title', {}, `${ok}: ${e.text}`));
    edgeLayer.append(hit, line);
  });
  const labels = [];
  for (const nd of g.nodes) {
    const [x, y] = at.get(nd.id);
    const c = h('svg:circle', {class: 'node', cx: x.toFixed(1), cy: y.toFixed(1), r: 6, 'data-node': nd.id},
                h('svg:title', {}, `${nd.label}\n${nd.id}`));
    c.addEventListener('click', () => showDetail('state ' + nd.id, [['screen', nd.label], ['visits', int(nd.visits)],
                                                                     ['first task', nd.first_task],
                                                                     ['signature', nd.signature]]));
    nodeLayer.append(c);
    const text = h('svg:text', {class: 'label', 'data-node': nd.id, x: x + 9, y: y + 4}, shorten(nd.label, 46));
    labelLayer.append(text);
    labels.push({text, x, y, degree: degree.get(nd.id) || 0});
  }
  svg.append(edgeLayer, nodeLayer, labelLayer);
  const box = h('div', {id: 'graph-box'}, svg);
  const counts = Object.fromEntries(OUTCOMES.map(o => [o, g.edges.filter(e => String(e.success) === o).length]));
  const legend = h('div', {class: 'muted'}, `${n} states, ${g.edges.length} subgoal edges (click an edge for its ` +
                   'text, effect, outcome and behaviour): ',
                   OUTCOMES.map(o => h('span', {class: `pill legend-${o}`}, `${o} ${counts[o]}`)));
  fill('graph', legend, box);
  placeLabels(svg, labels);
  const search = document.getElementById('graph-search');
  search.addEventListener('input', () => findNode(search.value, g.nodes, svg, box));
}

function findNode(query, nodes, svg, box) {
  svg.querySelectorAll('.hit').forEach(el => el.classList.remove('hit'));
  const q = query.trim().toLowerCase();
  const found = document.getElementById('graph-found');
  if (!q) { found.textContent = ''; return; }
  const hits = nodes.filter(nd => [nd.id, nd.label, nd.signature, nd.first_task]
    .some(v => String(v ?? '').toLowerCase().includes(q)));
  for (const nd of hits) {
    svg.querySelectorAll(`[data-node="${CSS.escape(nd.id)}"]`).forEach(el => el.classList.add('hit'));
  }
  found.textContent = `${hits.length} found`;
  if (hits.length) {
    const c = svg.querySelector(`circle[data-node="${CSS.escape(hits[0].id)}"]`);
    box.scrollTo({left: Math.max(0, Number(c.getAttribute('cx')) - box.clientWidth / 2),
                  top: Math.max(0, Number(c.getAttribute('cy')) - box.clientHeight / 2)});
  }
}

// ---- skills and knowledge ----
async function drawSkills(items) {
  const skills = items.filter(i => i.kind === 'skill' || i.what === 'skill');  // a stack's skills are kept as knowledge
  if (!skills.length) return;
  const rows = await Promise.all(skills.slice(0, 100).map(async s => {
    const d = await get('/v1/items/' + encodeURIComponent(s.id));
    return h('tr', {id: (s.kind === 'skill' ? 'item-' : 'skill-') + s.id}, h('td', {}, s.id, h('br'), h('span', {class: 'status-' + s.status}, s.status)),
             h('td', {}, d.summary), h('td', {}, h('pre', {class: 'code'}, d.code || '')));
  }));
  fill('skills', h('table', {}, h('tr', {}, ['skill', 'what it does', 'code'].map(t => h('th', {}, t))), rows));
}

function evidence(events) {
  const last = [...events].reverse().find(e => e.payload && typeof e.payload === 'object' && 'trials' in e.payload);
  const p = last ? last.payload : null;
  if (!p || (Number(p.trials) === 0 && Number(p.controls) === 0)) {
    return h('span', {class: 'muted'}, 'no trials yet');
  }
  const parts = [`trials ${int(p.trials)}`, `controls ${int(p.controls)}`];
  if (Number(p.trials) > 0 && Number(p.controls) > 0) parts.push(`Δ ${signed(p.difference)} (trial − control)`);
  parts.push(`effective uses ${int(p.effective_uses)}`, `harms ${int(p.harms)}`);
  const held = Array.isArray(p.held_back) && p.held_back.length
    ? [h('br'), h('span', {class: 'muted'}, 'held back: ' + p.held_back.map(String).join('; '))] : [];
  return h('span', {}, h('span', {class: 'evidence'}, parts.join(', ')), held);
}

async function drawKnowledge(items) {
  const ks = items.filter(i => i.kind === 'knowledge');
  if (!ks.length) return;
  const inGroup = (k, status) => status === 'rejected' ? ['rejected', 'retired'].includes(k.status)
    : status === 'manual' ? k.status === 'admitted' && k.manual === true
    : k.status === status && !(status === 'admitted' && k.manual === true);
  const groups = STATUS_HEADINGS.map(([status, title]) => [status, title, ks.filter(k => inGroup(k, status))]);
  const sections = await Promise.all(groups.filter(([, , list]) => list.length).map(async ([status, title, list]) => {
    const rows = await Promise.all(list.slice(0, 200).map(async k => {
      const hist = await get('/v1/items/' + encodeURIComponent(k.id) + '/history');
      return h('tr', {class: 'item', id: 'item-' + k.id}, h('td', {}, k.id), h('td', {}, k.what || k.kind),
               h('td', {class: 'status-' + k.status}, k.status + (k.manual === true ? ' (by hand)' : '')),
               h('td', {}, 'v' + int(k.version)),
               h('td', {}, k.summary, ...(k.quarantine ? [h('br'), h('span', {class: 'quarantine'},
                                                                     'quarantined: ' + String(k.quarantine))] : [])),
               h('td', {}, evidence(hist)));
    }));
    const head = h('tr', {}, ['id', 'kind', 'status', 'version', 'content', 'evidence'].map(t => h('th', {}, t)));
    return [h('h3', {class: 'status-heading', 'data-status': status}, `${title} (${list.length})`),
            h('table', {}, head, rows)];
  }));
  fill('knowledge', sections.flat());
}

// ---- episodes ----
function stepRow(method, round, ep, s) {
  const shot = s.screenshot ? h('img', {class: 'shot', loading: 'lazy', alt: `screen at step ${int(s.index)}`,
    src: `/v1/runs/${encodeURIComponent(method)}/${encodeURIComponent(round)}/${encodeURIComponent(ep.episode)}/` +
         `${encodeURIComponent(s.index)}/screenshot`}) : null;
  if (shot && key()) {  // an <img> cannot send the key: fetch it and show it as a blob
    shot.removeAttribute('src');
    fetch(`/v1/runs/${encodeURIComponent(method)}/${encodeURIComponent(round)}/${encodeURIComponent(ep.episode)}/` +
          `${encodeURIComponent(s.index)}/screenshot`, {headers: headers()})
      .then(r => r.ok ? r.blob() : null).then(b => { if (b) shot.src = URL.createObjectURL(b); });
  }
  const trial = new Set(Array.isArray(s.trial) ? s.trial : []);
  const ids = Array.isArray(s.items) ? s.items : [], withheld = Array.isArray(s.withheld) ? s.withheld : [];
  const stale = Array.isArray(s.stale) ? s.stale : [], again = new Set(Array.isArray(s.regrounded) ? s.regrounded : []);
  return h('tr', {class: 'step'},
    h('td', {}, int(s.index + 1)),
    h('td', {}, shot, s.action, s.error ? [h('br'), h('span', {class: 'status-rejected'}, s.error)] : []),
    h('td', {}, s.injected ? h('pre', {class: 'injection'}, s.injected) :
      h('i', {class: 'muted'}, s.note || (s.abstained ? 'abstained' : 'nothing injected')),
      ids.length ? h('div', {class: 'ids'}, 'items: ', ids.map(id => itemLink(id, trial.has(id)))) : null,
      withheld.length ? h('div', {class: 'muted'}, 'withheld as control: ', withheld.map(id => itemLink(id))) : null,
      again.size ? h('div', {class: 'muted'}, 're-grounded (element found under another id): ',
                     [...again].map(id => itemLink(id))) : null,
      stale.length ? h('div', {class: 'muted'}, 'withheld as stale (its elements are gone from this screen): ',
                       stale.map(id => itemLink(id))) : null),
    h('td', {}, `${int(s.tokens)} tok`));
}

async function episodes() {
  const [method, round] = document.getElementById('run').value.split('/');
  const eps = await get(`/v1/runs/${encodeURIComponent(method)}/${encodeURIComponent(round)}`);
  fill('episodes', eps.map(e => h('details', {},
    h('summary', {}, `${e.task} seed ${int(e.seed)}: ${e.success ? 'success' : 'failure'} (${count(e.steps.length, 'step')})`),
    h('table', {}, h('tr', {}, ['step', 'screen and action', 'injection (exact)', 'tokens'].map(t => h('th', {}, t))),
      e.steps.map(s => stepRow(method, round, e, s))))));
}

// What a section says once loading is over and it drew nothing (before that, it says "loading…").
const EMPTY = {graph: 'no graph in this memory', skills: 'no skills in this memory',
               knowledge: 'no knowledge items in this memory', episodes: 'no run directory served'};
function emptyStates() {
  for (const [id, text] of Object.entries(EMPTY)) {
    const el = document.getElementById(id);
    if (el.classList.contains('muted') && el.textContent === 'loading…') el.textContent = text;
  }
}

async function load() {
  try {
    const stats = await get('/v1/stats');
    const last = stats.committed_round_index;
    const rnd = Number.isInteger(last) && last >= 0 ? `; learned through round ${last + 1}` : '';
    document.getElementById('summary').textContent = `memory ${stats.method} (namespace ${stats.namespace}): ` +
      (Object.entries(stats.items).map(([k, v]) => `${k} ${int(v)}`).join(', ') || 'no items') +
      `; ${count(stats.events, 'event')}${rnd}`;
    fill('quarantine', (stats.quarantine || []).map(q => h('li', {},
      `episode ${q.episode || q.id} set aside, not learned: ${q.reason}`)));
    drawGraph(await get('/v1/graph'));
    const items = await get('/v1/items');
    await drawSkills(items);
    await drawKnowledge(items);
    const runs = await get('/v1/runs');
    document.getElementById('run').replaceChildren(...runs.flatMap(r => r.round_indexes.map(k =>
      h('option', {value: `${r.method}/${k}`}, `${r.method} · round ${Number(k) + 1}`))));
    if (runs.length) document.getElementById('episodes').textContent = 'choose a method and round';
    emptyStates();
    document.body.dataset.loaded = 'true';
  } catch (err) {
    document.getElementById('summary').textContent = 'error: ' + err.message;
    document.body.dataset.loaded = 'error';
  }
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('key-form').addEventListener('submit', ev => {
    ev.preventDefault();
    sessionStorage.setItem('guimem-key', document.getElementById('key').value);
    load();
  });
  document.getElementById('detail-close').addEventListener('click', () => {
    document.getElementById('detail').hidden = true;
  });
  document.getElementById('show-run').addEventListener('click', () => episodes().catch(err => {
    document.getElementById('episodes').textContent = 'error: ' + err.message;
  }));
  load();
});
