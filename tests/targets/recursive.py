"""The main thread recurses 20 deep and back, forever, so its stack changes under every read.

Like py-spy's recursive.py: a consistent stack is `<module>` then 1 to 21 `recurse` frames; a
walk that mixes frames from different moments or runs into freed frames is deeper or ends in a
`recurse` frame.
"""


def recurse(x):
    if x == 0:
        return  # LINE:bottom
    recurse(x - 1)  # LINE:recurse


print("ready", flush=True)  # LINE:ready
while True:  # LINE:loop
    recurse(20)  # LINE:module
