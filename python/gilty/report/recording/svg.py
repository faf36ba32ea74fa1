"""An SVG flame graph, drawn by inferno (the native module) from the collapsed lines.

Frames read ``function (file.py:line)``, cut from the right when narrow so the function name
stays; the tooltip gives the whole path. Each frame is coloured by the thread state it was
seen in most (``pictures.STATE_COLOURS``), so the state split reads at a glance.
"""

from __future__ import annotations

import html
import re
from typing import Optional

from gilty.report.labels import state_name
from gilty.report.pictures import PictureOptions, frame_names, groups, stack_rows, state_colour
from gilty.report.recording import collapsed
from gilty.report.recording import tasks as task_view
from gilty.sampling import launch
from gilty.sampling.analysis.pools import group_pools
from gilty.sampling.native_frames import is_native
from gilty.sampling.session import Recording

# One frame of inferno's output: <g><title>TEXT</title><rect ... fill="rgb(...)" .../>
_FRAME = re.compile(r'<g><title>([^<]*)</title><rect ([^>]*?)fill="[^"]*"')
# The title's tail inferno adds: " (1,234 samples, 12.34%)", or with a differential "...; +1.00%)".
_TAIL = re.compile(r"^(.*) (\([\d,]+ [^,()]+, [-+\d.]+%(?:; [-+\d.]+%)?\))$", re.S)


def title(recording: Recording, options: Optional[PictureOptions] = None) -> str:
    shown = groups(recording, options)
    if len(shown) == 1:
        return f"gilty: {shown[0].label}"
    parts = [
        f"{len(g.sessions)} workers of pid {g.sessions[0].target.ppid}"
        if g.merged
        else f"pid {g.sessions[0].target.pid}" + (f" ({g.role})" if g.role and g.role != "main" else "")
        for g in shown
    ]
    return f"gilty: {len(recording.sessions)} processes: {', '.join(parts)}"


def subtitle(recording: Recording, options: Optional[PictureOptions] = None) -> str:
    duration = recording.duration_s
    if duration is None:
        duration = max((s.duration_s for s in recording.sessions), default=0.0)
    idle = "idle included" if options is not None and options.idle else "idle left out (--idle draws it)"
    return f"{duration:.1f} s at {recording.rate_hz:g} Hz; each thread split by state, coloured by state; {idle}"


def _xml(text: str) -> str:
    return html.escape(text, quote=False)


# inferno's script draws each label from its frame's title (the title minus its last "(...)"). With
# the whole path in the title, the label is taken from the frame's data-label instead.
_LABEL_FROM_TITLE = 'find_child(e, "title").textContent.replace(/\\([^(]*\\)$/,"")'
_LABEL_FROM_DATA = '(e.getAttribute("data-label") || ' + _LABEL_FROM_TITLE + ")"


def recolour(svg: str, colours: dict, tooltips: dict) -> str:
    """Frames coloured from ``colours`` and, where inferno's script allows, titled from ``tooltips``
    (both keyed by frame label)."""
    long_titles = _LABEL_FROM_TITLE in svg
    if long_titles:
        svg = svg.replace(_LABEL_FROM_TITLE, _LABEL_FROM_DATA)

    def one(m: re.Match) -> str:
        text = html.unescape(m.group(1))
        tail = _TAIL.match(text)
        name, rest = (tail.group(1), " " + tail.group(2)) if tail else (text, "")
        colour = colours.get(name)
        fill = f'fill="{colour}"' if colour else m.group(0)[m.group(0).rindex("fill=") :]
        full = tooltips.get(name)
        if not long_titles or full is None or full == name:
            return f"<g><title>{m.group(1)}</title><rect {m.group(2)}{fill}"
        label = html.escape(name, quote=True)
        return f'<g data-label="{label}"><title>{_xml(full + rest)}</title><rect {m.group(2)}{fill}'

    return _FRAME.sub(one, svg)


def frame_styles(recording: Recording, options: Optional[PictureOptions]) -> tuple:
    """({label: colour}, {label: tooltip}): each frame in the colour of its main state; a C frame of
    `record --native` in a muted sand colour whatever its state, so C stands apart."""
    names = frame_names(recording, options)
    by_label: dict = {}
    tooltips: dict = {}
    native: set = set()
    for group, thread, state, session, stack_id, n in stack_rows(recording, options):
        state_text = state_name(state)
        for label in (group.label, thread):
            by_label.setdefault(collapsed.clean(label), {})
        by_label.setdefault(state_text, {}).setdefault(state_text, 0)
        by_label[state_text][state_text] += n
        for frame in session.stack(stack_id):
            label = collapsed.clean(names.short(frame))
            tooltips[label] = names.full(frame)
            if is_native(frame[2]):
                native.add(label)
            counts = by_label.setdefault(label, {})
            counts[state_text] = counts.get(state_text, 0) + n
    colours = {}
    for label, counts in by_label.items():
        if label in native:
            shade = sum(label.encode()) % 24
            colours[label] = f"rgb({196 + shade // 2},{178 + shade // 2},{140 + shade})"
        elif counts:
            main = max(counts, key=counts.__getitem__)
            colours[label] = state_colour(main, "" if label == main else label)
        else:
            colours[label] = NEUTRAL
    return colours, tooltips


_TID = re.compile(r" \(tid \d+\)$")
NEUTRAL = "rgb(200,200,200)"  # process and thread frames


def pools_merged(lines: list) -> tuple:
    """(collapsed ``lines`` with each process's pools of threads as one thread frame, the pool labels).

    Eight threads of a ThreadPoolExecutor side by side are eight slivers whose labels read ``..``;
    as one frame (``ThreadPoolExecutor-0_# ×8``) the pool's code is wide enough to read.
    """
    stacks: list = []
    threads: dict = {}  # process -> thread labels, first seen first
    for text in lines:
        key, _, n = text.rpartition(" ")
        parts = key.split(";")
        stacks.append((parts, int(n)))
        if len(parts) > 1 and parts[1] != task_view.TASKS_LABEL:
            threads.setdefault(parts[0], {}).setdefault(parts[1], None)
    renamed: dict = {}
    for process, labels in threads.items():
        pools = group_pools(
            list(labels), name_of=lambda label: _TID.sub("", label), tid_of=lambda label: label, counts_of=lambda _label: [1]
        )
        for pool in pools:
            if pool.size > 1:
                for label in pool.members:
                    renamed[(process, label)] = collapsed.clean(pool.name)
    if not renamed:
        return lines, set()
    merged: dict = {}
    for parts, n in stacks:
        if len(parts) > 1:
            parts = [parts[0], renamed.get((parts[0], parts[1]), parts[1]), *parts[2:]]
        key = ";".join(parts)
        merged[key] = merged.get(key, 0) + n
    return [f"{key} {n}" for key, n in sorted(merged.items())], set(renamed.values())


def render(recording: Recording, options: Optional[PictureOptions] = None) -> str:
    native = launch.native_module()
    names = frame_names(recording, options)
    lines = collapsed.lines(recording, options, names.short)
    if not lines and not (options and options.idle):
        # Every sample idle: an empty picture says nothing, the idle one at least says where it waits.
        options = PictureOptions(
            idle=True, merge_workers=options.merge_workers if options else None, lines=options.lines if options else True
        )
        lines = collapsed.lines(recording, options, names.short)
    lines, pool_labels = pools_merged(lines)
    svg = native.flamegraph_svg(lines, title(recording, options), subtitle(recording, options), "samples")
    colours, tooltips = frame_styles(recording, options)
    colours.update((label, NEUTRAL) for label in pool_labels)
    return recolour(svg, colours, tooltips)
