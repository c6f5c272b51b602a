"""Trace replay: SLS JSON (+ nodes file), Rumen, SYNTH, Google 2011 task events, SWF, Alibaba 2018
batch tasks and Google 2019 instance events, read into one model (``model``) and turned into
scenario operations (``convert``); a YARN fair-scheduler.xml into pools (``queues``)."""

FORMATS = ("sls", "rumen", "synth", "google2011", "swf", "alibaba2018", "google2019")
