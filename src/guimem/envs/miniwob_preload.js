// guimem: load and decode every image the page's style sheets name (`MiniWoBEnv._preload_images`).
const urls = new Set();
for (const sheet of Array.from(document.styleSheets)) {
  let rules = [];
  try { rules = Array.from(sheet.cssRules || []); } catch (e) { continue; }  // another origin's sheet
  for (const rule of rules) {
    for (const m of (rule.cssText || '').matchAll(/url\(["']?([^"')]+)["']?\)/g)) {
      try { urls.add(new URL(m[1], sheet.href || document.baseURI).href); } catch (e) {}
    }
  }
}
window.__guimemPreload = urls.size;
window.__guimemImages = [];
for (const url of urls) {
  const img = new Image();
  window.__guimemImages.push(img);
  img.src = url;
  img.decode().catch(() => null).finally(() => { window.__guimemPreload -= 1; });
}
