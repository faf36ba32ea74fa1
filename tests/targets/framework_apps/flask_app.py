from flask import Flask

from common import work

app = Flask(__name__)


@app.route("/")
def flask_view():
    return work()
