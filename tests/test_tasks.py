from fwsapp.data.tasks import completion_sample, qa_sample, summarization_sample


def words(count: int, stem: str = "w") -> str:
    return " ".join(f"{stem}{i}" for i in range(count))


def test_completion_takes_the_last_230_words_split_30_200():
    answer = words(300)
    sample = completion_sample(answer)
    assert sample.prompt.split() == [f"w{i}" for i in range(70, 100)]
    assert sample.reference.split() == [f"w{i}" for i in range(100, 300)]


def test_completion_needs_more_than_230_words():
    assert completion_sample(words(230)) is None
    assert completion_sample(words(231)) is not None


def test_qa_needs_a_ten_word_question_ending_in_a_question_mark():
    question = "What is the usual treatment for acute gout attacks today?"
    assert len(question.split()) == 10
    sample = qa_sample(question, "Anti-inflammatory medicines.")
    assert sample.prompt == question and sample.reference == "Anti-inflammatory medicines."
    assert qa_sample(question.replace(" today?", "?"), "x") is None  # nine words
    assert qa_sample(question.rstrip("?") + ".", "x") is None
    assert qa_sample(question, words(250)) is None
    assert qa_sample(question, words(249)) is not None


def test_summarization_applies_the_template_and_length_limits():
    sample = summarization_sample("My knee hurts when I run.", words(10))
    assert sample.prompt == (
        "Write a short question that summarizes this question: My knee hurts when I run. Summarized Question:"
    )
    assert summarization_sample(words(61), words(10)) is None
    assert summarization_sample(words(60), words(9)) is None
