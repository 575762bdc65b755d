// Keyboard shortcuts of the labelling page, after the review page's (shortcuts.js says when they act).
pageShortcuts("label-item", function (find) {
  "use strict";

  function check(selector) {
    const radio = find(selector);
    if (radio) radio.checked = true;
    return Boolean(radio);
  }

  // A confidence with a label chosen saves it; an incorrect label says what is wrong first.
  function confidence(value) {
    if (!check("#confidence-" + value)) return false;
    const verdict = find("input[name=verdict]:checked");
    if (!verdict) return true;
    const rationale = find("#rationale");
    if (verdict.value === "incorrect" && rationale && !rationale.value.trim()) {
      rationale.focus();
      return true;
    }
    const save = find("#label-save");
    if (save) save.click();
    return true;
  }

  function next() {
    const link = find("#label-next");
    if (link) link.click();
    return Boolean(link);
  }

  return {
    c: () => check("#verdict-correct"),
    i: () => check("#verdict-incorrect"),
    t: () => check("#verdict-cant_tell"),
    1: () => confidence(1),
    2: () => confidence(2),
    3: () => confidence(3),
    n: next,
  };
});
