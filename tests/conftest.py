"""Shared fixtures: real models, pulled through the project's own registry into the user cache."""

from __future__ import annotations

from pathlib import Path

import pytest

import pyaccel

# Small contexts keep the tests quick; every test that needs more asks for it.
TEST_N_CTX = 1024


def _pull(name: str) -> Path:
    return pyaccel.pull(name, progress=False)


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    return _pull("gemma-3-270m")


@pytest.fixture(scope="session")
def qwen_path() -> Path:
    return _pull("qwen2.5-coder-1.5b-instruct")


@pytest.fixture(scope="session")
def qwen_draft_path() -> Path:
    return _pull("qwen2.5-coder-0.5b-instruct")


@pytest.fixture(scope="session")
def gemma(gemma_path: Path) -> pyaccel.Model:
    model = pyaccel.Model(gemma_path, n_ctx=TEST_N_CTX)
    yield model
    model.close()


@pytest.fixture(scope="session")
def qwen(qwen_path: Path) -> pyaccel.Model:
    model = pyaccel.Model(qwen_path, n_ctx=TEST_N_CTX)
    yield model
    model.close()


@pytest.fixture(scope="session")
def qwen_draft(qwen_draft_path: Path) -> pyaccel.Model:
    model = pyaccel.Model(qwen_draft_path, n_ctx=TEST_N_CTX)
    yield model
    model.close()


MODEL_FIXTURES = frozenset({"gemma", "qwen", "qwen_draft", "gemma_path", "qwen_path", "qwen_draft_path"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that loads a model (through any fixture that pulls one) is `model`, so
    `pytest -m "not model"` is the fast suite that needs none."""
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)
