"""gunicorn's settings for the web process (`gunicorn -c config/gunicorn.py config.wsgi`; the Procfile
and deploy/systemd/courier-web.service use it). Bind address, workers and logs stay on the command line.

Responses say no `Server: gunicorn`: which server answers is of use to a scanner looking for a known
flaw, not to a client. gunicorn has no setting for it (its maintainers declined one, benoitc/gunicorn
#825); each response's Server header is the module constant gunicorn.http.wsgi.SERVER, read when the
response is made, so setting it here (before any worker forks) blanks it in every worker.
tests/test_gunicorn.py starts gunicorn with this file and reads the headers, so an upgrade that
changes this fails there."""

from gunicorn.http import wsgi

if not hasattr(wsgi, "SERVER"):  # a gunicorn that no longer reads it: fail at start, not silently
    raise RuntimeError("config/gunicorn.py: gunicorn.http.wsgi.SERVER is gone; hide the Server header another way")
wsgi.SERVER = ""
