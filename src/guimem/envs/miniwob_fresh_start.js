// guimem: a new episode that starts as it would on a freshly opened page, whatever the last episode did on it.
// MiniWoB++'s own reset (core.startEpisodeReal) keeps what the last episode did to the elements that outlive it:
// the focus (a field it typed into), an open widget (a date picker, still fading out when the next snapshot is
// taken), and the refs the last snapshot gave (numbered under the next episode's id once that one had ended, while
// the new elements count from 1 again). So: nothing focused, a press outside every widget (it closes a date picker)
// with the fades it starts finished at once, and only then the seed (a handler run by the clean-up cannot draw from
// it) and the episode; then every element is numbered anew by the first snapshot. A seeded page starts on the same
// screen, refs included (`MiniWoBEnv.expected_start` relies on it, and so does a reproduced episode).
// Argument: the task's seed.
if (document.activeElement && document.activeElement !== document.body) { document.activeElement.blur(); }
document.body.dispatchEvent(new MouseEvent('mousedown', {bubbles: true}));
if (window.jQuery) { window.jQuery(':animated').finish(); }
Math.seedrandom(arguments[0]);
core.setDataMode('train');
core.EPISODE_MAX_TIME = 1e9;
core.startEpisodeReal();
document.querySelectorAll('[data-wob_ref]').forEach(function (el) {
  delete el.dataset.wob_ref; delete el.dataset.wob_eps;
});
