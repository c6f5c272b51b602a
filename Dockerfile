# The emulator in a container: the quick-start scenario watched live on the status page.
#   docker build -t hbemu .
#   docker run --rm -p 8080:8080 hbemu          # then open http://localhost:8080/
# See docs/docker.md (other scenarios, keeping the results, a shell).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# The dependencies first, in a layer of their own that a change to the code does not rebuild: the
# versions in constraints.txt (what CI tested) of those pyproject.toml lists.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
        > /tmp/requirements.txt \
    && pip install -c constraints.txt -r /tmp/requirements.txt && rm /tmp/requirements.txt
# Then the package, its dependencies already installed (its layer is reused while only scenarios change).
COPY README.md ./
COPY emulator ./emulator
COPY rm ./rm
COPY nodemanager ./nodemanager
COPY ringmon ./ringmon
RUN pip install . --no-deps && rm -rf build *.egg-info
COPY scenarios ./scenarios

# Not root: results go to /runs, the one directory this user owns (mount a volume there to keep them).
RUN useradd --create-home --uid 10001 hbemu && mkdir -p /runs && chown hbemu:hbemu /runs
USER hbemu

EXPOSE 8080
# Ctrl-C (and `docker stop`) end the run or the serving cleanly: the emulator handles SIGINT.
STOPSIGNAL SIGINT
# Run the quick-start in paced real time (20x: 30 emulated minutes in 90 s) on the status page, then
# keep serving the final state until stopped. The page listens on every interface of the container.
CMD ["emulator", "run", "scenarios/quickstart.toml", "--serve", "0.0.0.0:8080", "--out", "/runs/quickstart"]
