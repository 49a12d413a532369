"""myattn's own difftest test (after `pip install -e examples/myattn`): the pytest fixture
runs a campaign through the entry point and fails with the shrunk case on a bug."""


def test_myattn_backward(difftest_campaign):
    difftest_campaign("myattn", profile="quick")
