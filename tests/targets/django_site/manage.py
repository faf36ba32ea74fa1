"""A small Django project (admin included) whose views carry known bottlenecks for `gilty load`:

  /report/  runs a slow sqlite query (a recursive count): the time goes to sqlite, without the GIL
  /spin/    holds the GIL in a Python loop
  /ok/      answers at once
  /admin/   Django's admin

Run: gunicorn -w 2 --chdir tests/targets/django_site site_conf.wsgi (the views are imported on each
worker's first request, as Django does)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_conf.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
