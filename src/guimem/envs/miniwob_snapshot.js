// guimem: one MiniWoB++ observation as a flat list of UI elements.
// Refs come from core.getDOMInfo(), so core.elementClick(ref) works on them in this episode.
// With a first argument true it is a preview (taken while the page settles): it reads the page and changes
// nothing in it, so an element that has no ref yet gets the ref the real snapshot would give it now (the page's
// counter is left alone): core.getDOMInfo's numbering (its walk, its skips) is worked out without writing it.
var PREVIEW = arguments[0] === true;
return (function () {
  var predicted = null, next = 0;
  function fresh(el) {
    return el.dataset.wob_ref === undefined || el.dataset.wob_eps !== 'e' + WOB_EPISODE_ID;
  }
  var SKIPPED = {'query': 1, 'reward-display': 1, 'sync-task-cover': 1, 'click-canvas': 1};  // as core.getDOMInfo
  function number(el) {  // core.getDOMInfoOfElement's order and skips, counting instead of writing
    if (SKIPPED[el.id]) return;
    var r = el.getBoundingClientRect();
    if (r.width == 0 || r.height == 0) return;
    if (fresh(el)) predicted.set(el, next++);
    Array.prototype.forEach.call(el.children, number);
  }
  if (PREVIEW) {
    predicted = new Map();
    next = core.nextRefCode;
    number(document.body);
  } else {
    core.getDOMInfo();
  }
  // the whole body, as core.getDOMInfo does: jQuery UI dialogs and menus are attached outside #wrap
  var root = document.body;
  var out = [];
  var FORM = {INPUT: 1, TEXTAREA: 1, SELECT: 1, BUTTON: 1};
  var TEXT_TYPES = {text: 1, password: 1, email: 1, number: 1, search: 1, tel: 1, url: 1, date: 1, time: 1};
  var ROLES = {tab: 1, button: 1, link: 1, checkbox: 1, radio: 1, option: 1, menuitem: 1, textbox: 1,
               combobox: 1, listitem: 1};
  function ariaRole(el) {
    var r = el.getAttribute('role');
    return r && ROLES[r] ? r : null;
  }

  function visible(el) {
    var r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) return false;
    var s = window.getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none' && s.opacity !== '0';
  }
  function ownText(el) {
    var t = '';
    el.childNodes.forEach(function (c) { if (c.nodeType === 3) t += c.data; });
    return t.replace(/\s+/g, ' ').trim();
  }
  function labelOf(el) {
    var l = el.getAttribute('aria-label') || el.getAttribute('title') || el.getAttribute('alt') || '';
    if (!l && el.id) {
      var f = document.querySelector('label[for="' + el.id + '"]');
      if (f) l = f.textContent;
    }
    if (!l && el.closest && el.closest('label')) l = el.closest('label').textContent;
    if (!l && el.getAttribute('placeholder')) l = el.getAttribute('placeholder');
    if (!l && el.tagName === 'INPUT' && el.id) l = el.id;
    return (l || '').replace(/\s+/g, ' ').trim();
  }
  function roleOf(el, pointer) {
    var tag = el.tagName, type = (el.getAttribute('type') || 'text').toLowerCase();
    var aria = ariaRole(el);
    if (aria) return aria;
    if (tag === 'A') return el.closest('[role=tab], [role=tablist]') ? 'tab' : 'link';
    if (tag === 'BUTTON') return 'button';
    if (tag === 'TEXTAREA') return 'textbox';
    if (tag === 'SELECT') return 'combobox';
    if (tag === 'OPTION') return 'option';
    if (tag === 'IMG') return pointer ? 'button' : 'image';
    if (/^H[1-6]$/.test(tag)) return pointer ? 'tab' : 'heading';
    if (tag === 'INPUT') {
      if (type === 'checkbox') return 'checkbox';
      if (type === 'radio') return 'radio';
      if (type === 'button' || type === 'submit' || type === 'reset') return 'button';
      return TEXT_TYPES[type] ? 'textbox' : 'other';
    }
    if (tag === 'LI' && pointer) return 'listitem';
    if (pointer) {
      var deco = window.getComputedStyle(el).textDecorationLine || '';
      return deco.indexOf('underline') >= 0 || tag === 'SPAN' && ownText(el) ? 'link' : 'button';
    }
    return ownText(el) ? 'text' : 'button';
  }
  function containerOf(el) {
    var p = el.parentElement;
    while (p && p !== root) {
      if (p.tagName === 'FORM' || (p.id && p.id !== 'area' && p.id !== 'wrap')) return p.id || p.tagName.toLowerCase();
      p = p.parentElement;
    }
    return '';
  }
  function bounds(el) {
    var r = el.getBoundingClientRect();
    return {x: r.left, y: r.top, w: r.width, h: r.height};
  }
  function emit(el, role, text, label, clickable, extra) {
    var ref = el.dataset.wob_ref;
    if (fresh(el)) {
      if (!PREVIEW || !predicted.has(el)) return;  // what the real snapshot leaves out, the preview does too
      ref = predicted.get(el);
    }
    var cls = (typeof el.className === 'string') ? el.className.trim().split(/\s+/)[0] : '';
    var item = {
      ref: String(ref), role: role, text: (text || '').slice(0, 120), label: (label || '').slice(0, 80),
      resource_id: el.id || '', bounds: bounds(el), clickable: !!clickable,
      editable: role === 'textbox', focused: document.activeElement === el,
      enabled: !el.disabled, container: containerOf(el), cls: cls
    };
    for (var k in extra) item[k] = extra[k];
    out.push(item);
  }
  function walk(el) {
    if (SKIPPED[el.id]) return;
    if (!visible(el)) return;
    var tag = el.tagName;
    var pointer = window.getComputedStyle(el).cursor === 'pointer';
    var parentPointer = el.parentElement && window.getComputedStyle(el.parentElement).cursor === 'pointer';
    var text = ownText(el);
    var leaf = el.children.length === 0;
    var hasInner = !!el.querySelector('a, button, input, select, textarea');
    // cursor is inherited: a pointer under a pointer parent is part of a clickable row, except icons
    var interactive = FORM[tag] || tag === 'A' || el.hasAttribute('onclick') ||
                      (ariaRole(el) && !hasInner) || (pointer && !parentPointer && !hasInner) ||
                      (pointer && parentPointer && leaf && !text) ||
                      // empty classed leaves are icons whose pointer cursor may only show on :hover
                      (leaf && !text && (tag === 'SPAN' || tag === 'I' || tag === 'IMG') &&
                       typeof el.className === 'string' && el.className.trim() !== '');
    if (tag === 'SELECT') {
      emit(el, 'combobox', el.options[el.selectedIndex] ? el.options[el.selectedIndex].text : '', labelOf(el), true,
           {value: el.value});
      Array.prototype.forEach.call(el.options, function (o, i) {
        var oref = o.dataset.wob_ref;
        if (fresh(o)) {
          if (PREVIEW) {
            oref = predicted.has(o) ? predicted.get(o) : next++;
          } else {
            oref = o.dataset.wob_ref = core.nextRefCode++;
            o.dataset.wob_eps = 'e' + WOB_EPISODE_ID;
          }
        }
        if (!PREVIEW) core.previousDOMInfo[oref] = o;
        var ob = bounds(el);
        out.push({ref: String(oref), role: 'option', text: o.text, label: '', resource_id: o.id || '',
                  bounds: ob, clickable: true, editable: false, focused: false, enabled: !o.disabled,
                  container: el.id || 'select', checked: o.selected, cls: ''});
      });
      return;
    }
    if (interactive) {
      var role = roleOf(el, pointer);
      var full = (tag === 'INPUT' || tag === 'TEXTAREA') ? '' : (el.innerText || '').replace(/\s+/g, ' ').trim();
      var extra = {};
      if (tag === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) extra.checked = el.checked;
      else if (tag === 'INPUT' || tag === 'TEXTAREA') extra.value = el.value;
      var label = labelOf(el);
      if (!label && !full && typeof el.className === 'string' && el.className) label = el.className.trim().split(/\s+/)[0];
      emit(el, role, full || (tag === 'INPUT' ? '' : text), label, true, extra);
      if (tag === 'A' || tag === 'BUTTON' || tag === 'INPUT' || tag === 'TEXTAREA') return;
    } else if (text && leaf) {
      emit(el, /^H[1-6]$/.test(tag) ? 'heading' : 'text', text, '', pointer, {});
      return;
    } else if (text) {
      emit(el, 'text', text, '', pointer, {});
    }
    for (var i = 0; i < el.children.length; i++) walk(el.children[i]);
  }
  for (var i = 0; i < root.children.length; i++) walk(root.children[i]);
  return {
    elements: out,
    done: WOB_DONE_GLOBAL,
    raw_reward: WOB_RAW_REWARD_GLOBAL,
    reason: WOB_REWARD_REASON === null ? '' : String(WOB_REWARD_REASON)
  };
})();
