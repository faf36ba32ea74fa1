"""Specialization of hot code in a live process (``gilty specialization``): the session model
(``session``) and the analysis over it (``analysis``); renderers live in ``gilty.report``."""
