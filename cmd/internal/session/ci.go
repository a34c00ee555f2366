package session

import (
	"context"
	"github.com/ocx-go/ocx/actors/turn"
	"log/slog"

	onrecord "github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// ci is a CI run (seed 000's command runner, D5): the daemon launched the
// session for one check-in on a listened branch. It puts the tree on that
// check-in, runs the command there, tags the check-in ci green or red with
// the command's last line, says a red one on its own record, and exits 0
// once the tag is on the record. It answers no post. A reviewer's run
// (the definition's result verdict, D42) is the same run whose result is
// its login's verdict: the audited tag, pass or fail with the last line,
// against its own record.
func (s *session) ci(ctx context.Context) int {
	checkin := s.launch.Checkin
	log := s.log.With(keyCheckin, checkin)
	kind := s.def.Result.Or()
	if done, value := s.alreadyTested(ctx, checkin); done {
		log.Info("the check-in already carries the login's "+kind.TagName()+" tag; nothing to do", keyEvent, "ci-skip", keyTag, value)
		return s.finish(ExitOK, "already tested")
	}
	err := s.try(ctx, "check out "+checkin, true, func() error {
		if _, err := s.fsl.Run(ctx, []string{"checkout", "--force", checkin}); err != nil {
			// The clone may lack the check-in yet: pull, and the next
			// attempt finds it.
			_ = s.fsl.Pull(ctx, s.ws.Clone)
			return err
		}
		return nil
	})
	if s.signaled() {
		return s.stopBySignal(ctx)
	}
	if err != nil {
		log.Error("the tree cannot be put on the check-in; no result", keyEvent, "ci-failed", keyErr, err)
		return s.finish(exitFailed, "check-out failed")
	}
	s.holdTurn(checkin)
	env := append(s.turnEnv(), "OCX_CHECKIN="+checkin, "OCX_RECORD="+s.rec.ID)
	out, ended := s.runTurn(turnSpec{argv: s.def.Command, env: env, dir: s.ws.Tree, combined: true})
	s.releaseTurn()
	log.Info("CI command ended", keyEvent, "ci-ran", keyEnded, ended.String(), "bytes", int64(len(out.Tail))+out.Dropped)
	if s.stopSig != nil {
		// A run cut short is neither green nor red: no tag, and the daemon
		// does not launch again for it (D5).
		return s.stopBySignal(ctx)
	}
	if kind == messages.ResultVerdict {
		return s.verdict(ctx, log, checkin, turn.VerdictOf(out, ended, s.rec.ID))
	}
	tag := turn.CIResultOf(out, ended)
	value, err := tag.Value()
	if err != nil {
		log.Error("the result cannot be said as a tag", keyEvent, "ci-failed", keyErr, err)
		return s.finish(exitFailed, "bad result")
	}
	h, err := s.tag(ctx, checkin, messages.CITagName, value)
	if err != nil {
		log.Error("the ci tag is not on the record", keyEvent, "ci-failed", keyErr, err)
		return s.finish(exitFailed, "tag not written")
	}
	log.Info("ci tag written", keyEvent, "ci-tag", keyTag, value, keyHash, h)
	if tag.Result == messages.CIRed {
		note := &messages.CINote{Checkin: checkin, Result: tag.Result, Line: tag.Line}
		at := s.launchPost
		if at.Record != s.rec.ID {
			at = turn.Post{Hash: s.rec.First, Kind: s.rec.Kind, Record: s.rec.ID}
		}
		if nh, err := s.writeNote(ctx, note, at, false); err != nil {
			log.Error("the red result is tagged but not said on the record", keyEvent, "ci-note", keyErr, err)
		} else {
			log.Info("ci note written", keyEvent, "ci-note", keyHash, nh)
		}
	}
	return s.finish(ExitOK, "ci "+string(tag.Result))
}

// tag tags checkin name=value on the record, trying again as s.try does,
// and returns the tag change's hash.
func (s *session) tag(ctx context.Context, checkin, name, value string) (string, error) {
	var h string
	err := s.try(ctx, "tag "+checkin, false, func() error {
		var err error
		h, err = s.remote.tag(ctx, checkin, name, value)
		return err
	})
	return h, err
}

// verdict writes a reviewer's verdict on the check-in it judged, as its
// login (D42), and exits 0 once it is on the record. The daemon launches a
// reviewer only for a check-in it may judge (E6, onrecord.MayNotJudge); where
// the node can be read here, the session checks that again and writes
// nothing for one it may not.
func (s *session) verdict(ctx context.Context, log *slog.Logger, checkin string, v messages.Verdict) int {
	value := v.TagValue()
	if _, err := messages.ParseVerdict(value); err != nil {
		log.Error("the verdict cannot be said as a tag", keyEvent, "ci-failed", keyErr, err)
		return s.finish(exitFailed, "bad result")
	}
	if s.node != nil {
		if ci, err := s.node.Info(ctx, checkin); err == nil {
			if why := onrecord.MayNotJudge(s.b.Login, ci); why != "" {
				log.Warn("the check-in may not be judged by this login; no verdict: "+why, keyEvent, "ci-skip")
				return s.finish(ExitOK, "may not judge")
			}
		}
	}
	h, err := s.tag(ctx, checkin, messages.AuditedTag, value)
	if err != nil {
		log.Error("the verdict is not on the record", keyEvent, "ci-failed", keyErr, err)
		return s.finish(exitFailed, "tag not written")
	}
	log.Info("verdict written", keyEvent, "ci-tag", keyTag, value, keyHash, h)
	word := messages.VerdictFail
	if v.Pass {
		word = messages.VerdictPass
	}
	return s.finish(ExitOK, "verdict "+word)
}

// alreadyTested says whether the check-in already carries a ci tag this
// login sent (a second launch for one check-in), as the node's repository
// recorded the sender. Inside the sandbox the node cannot be read, and the
// clone knows only the name written in each tag change, which anyone who may
// push can forge to make CI pass over a check-in: there the daemon's choice
// stands (it launches only for a check-in with no result of this login's,
// read on the node, D5).
func (s *session) alreadyTested(ctx context.Context, checkin string) (bool, string) {
	if s.node == nil {
		return false, ""
	}
	changes, err := s.node.CheckinTags(ctx, checkin)
	if err != nil {
		return false, ""
	}
	ci, err := s.node.Info(ctx, checkin)
	if err != nil {
		return false, ""
	}
	value, found := onrecord.RunResult(s.def.Result, s.b.Login, ci, changes)
	return found, value
}
