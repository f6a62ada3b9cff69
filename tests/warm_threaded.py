"""A module that starts a thread when imported: a zygote that preloads it must not fork."""

import threading

threading.Thread(target=threading.Event().wait, daemon=True).start()
