// guimem: the time of the page's last change, kept by the page itself (for the preview: `MiniWoBEnv._preview_when_quiet`):
// a DOM change, and what changes a snapshot without one (a field's value, a scroll, the focus, a CSS transition or
// animation). Watching changes nothing in the page.
if (!window.__guimemQuiet) {
  var q = window.__guimemQuiet = {last: performance.now()};
  var bump = function () { q.last = performance.now(); };
  new MutationObserver(bump).observe(document.documentElement,
                                     {subtree: true, childList: true, attributes: true, characterData: true});
  ['input', 'change', 'scroll', 'focusin', 'focusout', 'transitionrun', 'transitionend', 'transitioncancel',
   'animationstart', 'animationend', 'animationcancel'].forEach(function (type) {
    window.addEventListener(type, bump, {capture: true, passive: true});
  });
}
