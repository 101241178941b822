// The memory inspector. Everything shown comes from the API and is hostile: it enters the page only
// as text nodes and attribute values (never innerHTML), and the page's CSP allows no inline script.
'use strict';
const SVG = 'http://www.w3.org/2000/svg';
const COLOUR = {yes: '#1a7f37', no: '#cf222e', uncertain: '#8c959f'};

function h(tag, attrs, ...children) {
  const el = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const num = (v, digits) => Number.isFinite(Number(v)) ? Number(v).toFixed(digits) : '?';
const int = v => Number.isInteger(Number(v)) ? String(Number(v)) : '?';

function key() { return sessionStorage.getItem('guimem-key') || ''; }
async function get(path) {
  const headers = key() ? {'Authorization': 'Bearer ' + key()} : {};
  const r = await fetch(path, {headers});
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

function drawGraph(g) {
  if (!g.nodes.length) return;
  const W = 900, H = 520, R = 220, cx = W / 2, cy = H / 2, pos = {};
  g.nodes.forEach((n, i) => {
    const a = 2 * Math.PI * i / g.nodes.length;
    pos[n.id] = [cx + R * Math.cos(a), cy + R * Math.sin(a)];
  });
  const svg = h('svg:svg', {id: 'graph-svg', viewBox: `0 0 ${W} ${H}`});
  const marker = h('svg:marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 6,
                                  markerHeight: 6, orient: 'auto'}, h('svg:path', {d: 'M0,0L10,5L0,10z', fill: '#999'}));
  svg.append(h('svg:defs', {}, marker));
  for (const e of g.edges) {
    const [x1, y1] = pos[e.source] || [cx, cy], [x2, y2] = pos[e.target] || [cx, cy];
    const d = e.source === e.target ? `M${x1},${y1} c 30,-40 60,0 0,12` : `M${x1},${y1} L${x2},${y2}`;
    const ok = String(e.success) in COLOUR ? String(e.success) : 'uncertain';
    svg.append(h('svg:path', {class: `edge success-${ok}`, d, stroke: COLOUR[ok], 'stroke-width': 2, fill: 'none',
                              'marker-end': 'url(#arrow)'}, h('svg:title', {}, `${ok}: ${e.text}`)));
  }
  for (const n of g.nodes) {
    const [x, y] = pos[n.id];
    svg.append(h('svg:circle', {class: 'node', cx: x, cy: y, r: 9, fill: '#0969da'},
                 h('svg:title', {}, `${n.id} ${n.label}`)));
    svg.append(h('svg:text', {x: x + 12, y: y + 4, 'font-size': 11}, String(n.label).slice(0, 30)));
  }
  const legend = h('div', {class: 'muted'}, `${g.nodes.length} nodes, ${g.edges.length} edges: `,
                   Object.entries(COLOUR).map(([k, c]) => h('span', {class: `pill legend-${k}`}, k)));
  fill('graph', svg, legend);
}

async function drawSkills(items) {
  const skills = items.filter(i => i.kind === 'skill');
  if (!skills.length) return;
  const rows = await Promise.all(skills.slice(0, 50).map(async s => {
    const d = await get('/v1/items/' + encodeURIComponent(s.id));
    return h('tr', {}, h('td', {}, s.id, h('br'), h('span', {class: 'status-' + s.status}, s.status)),
             h('td', {}, h('pre', {class: 'code'}, d.code || '')));
  }));
  fill('skills', h('table', {}, h('tr', {}, h('th', {}, 'skill'), h('th', {}, 'code')), rows));
}

function evidence(events) {
  const last = [...events].reverse().find(e => e.payload && typeof e.payload === 'object' && 'trials' in e.payload);
  if (!last) return h('span', {class: 'muted'}, 'no trials yet');
  const p = last.payload;
  const held = Array.isArray(p.held_back) && p.held_back.length
    ? [h('br'), h('span', {class: 'muted'}, 'held back: ' + p.held_back.map(String).join('; '))] : [];
  return h('span', {}, h('span', {class: 'evidence'}, `trials ${int(p.trials)}, controls ${int(p.controls)}, ` +
           `Δ ${num(p.difference, 2)}, effective uses ${int(p.effective_uses)}, harms ${int(p.harms)}`), held);
}

async function drawKnowledge(items) {
  const ks = items.filter(i => i.kind === 'knowledge');
  if (!ks.length) return;
  const rows = await Promise.all(ks.slice(0, 200).map(async k => {
    const hist = await get('/v1/items/' + encodeURIComponent(k.id) + '/history');
    return h('tr', {class: 'item'}, h('td', {}, k.id), h('td', {class: 'status-' + k.status}, k.status),
             h('td', {}, 'v' + int(k.version)), h('td', {}, k.summary), h('td', {}, evidence(hist)));
  }));
  const head = h('tr', {}, ['id', 'status', 'version', 'content', 'evidence'].map(t => h('th', {}, t)));
  fill('knowledge', h('table', {}, head, rows));
}

async function episodes() {
  const [method, round] = document.getElementById('run').value.split('/');
  const eps = await get(`/v1/runs/${encodeURIComponent(method)}/${encodeURIComponent(round)}`);
  fill('episodes', eps.map(e => h('details', {},
    h('summary', {}, `${e.task} seed ${int(e.seed)}: ${e.success ? 'success' : 'failure'}`),
    h('table', {}, e.steps.map(s => h('tr', {},
      h('td', {}, int(s.index)),
      h('td', {}, s.action, s.error ? [h('br'), h('span', {class: 'status-rejected'}, s.error)] : []),
      h('td', {}, s.abstained ? h('i', {}, 'abstained') : '', h('pre', {}, s.injected || '')),
      h('td', {}, `${int(s.tokens)} tok`)))))));
}

async function load() {
  try {
    const stats = await get('/v1/stats');
    document.getElementById('summary').textContent = `memory ${stats.method} (namespace ${stats.namespace}): ` +
      Object.entries(stats.items).map(([k, v]) => `${k} ${int(v)}`).join(', ') + `; ${int(stats.events)} events`;
    drawGraph(await get('/v1/graph'));
    const items = await get('/v1/items');
    await drawSkills(items);
    await drawKnowledge(items);
    const runs = await get('/v1/runs');
    document.getElementById('run').replaceChildren(
      ...runs.flatMap(r => r.rounds.map(k => h('option', {value: `${r.method}/${k}`}, `${r.method}/${k}`))));
    if (runs.length) document.getElementById('episodes').textContent = 'choose a method and round';
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
  document.getElementById('show-run').addEventListener('click', () => episodes().catch(err => {
    document.getElementById('episodes').textContent = 'error: ' + err.message;
  }));
  load();
});
