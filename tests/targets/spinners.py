"""Two threads busy in spin_forever(), holding or waiting for the GIL all the time."""
import threading


def spin_forever():
    x = 0
    while True:  # LINE:spin_loop
        x += 1


for i in (1, 2):
    threading.Thread(target=spin_forever, name=f"spinner-{i}", daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
