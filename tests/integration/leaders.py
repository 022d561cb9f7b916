"""What the no-network leader tests share: a real Partition needs an ISR writer."""


class NoIsrChanges:
    """An ISR writer for scenarios whose ISR must stay as it is: any change fails the test."""

    def spawn_change(self, *args, **kwargs):
        raise AssertionError("the ISR must not change here")

    change = remove = spawn_change
