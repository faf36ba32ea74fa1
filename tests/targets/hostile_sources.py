"""Hot code whose file names are hostile: each FILE argument names the code object of one
polymorphic attribute loop (``compile(src, FILE, "exec")``), as a target author may name any file.

  hostile_sources.py [--user UID:GID] [--chroot DIR] [--fifo-for LIB] FILE...

--chroot enters DIR first (the code's files are then named inside the target's root), --user drops
to that user and group (a root-started interpreter: pyenv's own files are root's) before "ready".
--fifo-for deletes LIB, a library this process mapped, and plants a FIFO where its maps now name it
("LIB (deleted)").
The site of each loop is on line 3 (``o.x``)."""

import os
import sys

SOURCE = "def hot(objs):\n    for o in objs:\n        o.x\n"


class A:
    def __init__(self):
        self.x = 1


class B:
    def __init__(self):
        self.y = 0
        self.x = 2


def main(argv):
    user = root = None
    while argv and argv[0].startswith("--"):
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--user":
            user = tuple(int(v) for v in value.split(":"))
        elif flag == "--chroot":
            root = value
        elif flag == "--fifo-for":
            os.unlink(value)
            os.mkfifo(value + " (deleted)", 0o666)
    loops = []
    for name in argv:
        scope = {}
        exec(compile(SOURCE, name, "exec"), scope)
        loops.append(scope["hot"])
    if root:
        os.chroot(root)
        os.chdir("/")
    if user:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
    objs = [A() if i % 2 else B() for i in range(200)]
    print("ready", flush=True)
    while True:
        for hot in loops:
            hot(objs)


if __name__ == "__main__":
    main(sys.argv[1:])
