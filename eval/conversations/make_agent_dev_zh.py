"""Write the Chinese (Simplified) agent-shaped conversation set ``eval/conversations/agent_dev_zh``.

The Chinese counterpart of ``make_agent_dev.py`` (whose data types and small helpers it imports: run it as a script,
``python eval/conversations/make_agent_dev_zh.py``, so that its folder is on ``sys.path``). Written by us, by hand:
every fact, reply and question below is in this file, in Simplified Chinese as people type to a chat assistant; the
script only lays them out. No network, no model, no randomness that is not seeded: two runs write byte-identical
files.

Shape: each conversation is one human user talking to an assistant over 3-5 sessions. User turns state personal
facts in the first person (some several in one turn, some with numbers, ids or dates) or are chit-chat; every user
turn is followed by an assistant turn: an acknowledgement drawn from :data:`ACKS` (seeded by the conversation id)
unless the conversation gives a reply (a question back, or an informative reply that reuses some of the fact's
words). Some sessions open or close with a chit-chat exchange from :data:`OPENERS` / :data:`CLOSERS`. Half of the
conversations name the user (``speaker`` is a Chinese name), the other half leave the speaker empty; assistant
turns have ``role`` ``assistant`` and speaker ``""`` or ``"assistant"``. ``session_date_time`` keeps the English
format of the LoCoMo layout (``"1:56 pm on 8 May, 2023"``), which the evaluation parses.

Files: ``turns.jsonl`` and ``qa.jsonl`` exactly as in ``make_agent_dev.py`` (same fields, same categories).

Checks made before writing (a failure raises ``SystemExit``): keys unique and known, session dates strictly
increasing, multi-hop evidence in two sessions or more, an updated fact's evidence later than the fact it replaces,
an unanswerable question names at least one of the words it is about and none of them occurs in its conversation
(a Chinese word: anywhere, as a substring of the text; a Latin one: as a whole word, any case), the minimum counts
(10 conversations, 150 answerable, 40 unanswerable questions).

Usage: ``python eval/conversations/make_agent_dev_zh.py [--out DIR] [--check]`` (``--check``: compare with the
files in DIR instead of writing; exit 1 when they differ).
"""

from __future__ import annotations

import random
import re
import sys
from datetime import datetime
from pathlib import Path

from make_agent_dev import CATEGORIES, Conversation, Line, S, _dump, _shuffled, _turn, cli, none, q, upd
from make_agent_dev import _counts as counts_of

OUT = Path(__file__).resolve().parent / "agent_dev_zh"
SEED = "agent_dev_zh"
"""The acknowledgement / opener / closer draws are seeded by ``f"{SEED}:{conv_id}"``."""

ACKS = (
    "好的，记下了。",
    "收到！",
    "明白了，谢谢告诉我。",
    "了解～",
    "好的，我记住了。",
    "知道了！",
    "谢谢你告诉我这些。",
    "嗯嗯，记下了。",
    "明白！",
    "好的，了解了。",
    "收到，谢谢更新！",
    "好嘞，记住了。",
    "OK，记下了。",
    "原来如此。",
    "好的，我会记着的。",
    "明白啦，谢谢分享。",
)
"""Pure acknowledgements: the assistant's reply to a user turn that the conversation gives no reply for."""

OPENERS = (
    ("又来打扰啦！", "欢迎回来！今天想聊点什么？"),
    ("在吗？", "在的，请说。"),
    ("你好呀！", "你好！有什么可以帮你的？"),
    ("嗨，我又来了。", "欢迎回来！"),
    ("趁我还没忘，先说个事。", "好的，你说。"),
    ("今天累死了。", "辛苦了，那我们轻松点聊。"),
    ("早上好！", "早上好！今天过得怎么样？"),
    ("好久没来了，不好意思。", "不用道歉，很高兴又见到你。"),
    ("哈喽～", "哈喽！最近有什么新鲜事？"),
    ("晚上好，忙完了终于有空。", "晚上好！我随时都在。"),
)
"""Chit-chat exchanges (user, assistant) that may open a session: no fact."""

CLOSERS = (
    ("下午总犯困，有什么提神的小办法吗？", "每小时起来活动几分钟、多喝水，比想象中管用。"),
    ("有什么好办法记住要做的事？", "用一个待办清单，每天早上看一遍，对大多数人都很有效。"),
    ("谢谢，很有帮助。", "能帮上忙就好！"),
    ("好了，今天就这些。", "好的，随时来找我聊。"),
    ("能帮我总结一下今天聊了什么吗？", "当然：你今天说的新情况我都记下了。"),
    ("我再想想，回头告诉你。", "不着急，慢慢想。"),
    ("哈哈，扯远了。", "哈哈，没关系。"),
    ("怎么礼貌地拒绝一个会议？", "可以说：谢谢邀请，这次我去不了，会后我看一下纪要。"),
    ("不好意思，刚才走神了。", "没事没事。"),
    ("先拜拜啦！", "拜拜，下次聊！"),
    ("提醒我这周对自己好一点。", "记下了：这周要对自己好一点。"),
    ("好了，我得去忙了。", "好的，回头见。"),
)
"""Chit-chat exchanges (user, assistant) that may close a session: no fact."""


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        "agent-zh-01",
        "林晓",
        "",
        (
            S(
                "2:10 pm on 6 March, 2023",
                ("job", "我上周刚入职星河科技，做前端开发，第一周基本都在配环境。", "新团队感觉怎么样？"),
                (None, "还行吧，同事们都挺照顾我的。", "那就好！"),
                ("city_old", "我现在还住在杭州滨江，跟两个大学同学合租。", None),
                (
                    "coffee",
                    "最近改喝豆浆了，咖啡喝多了晚上睡不着。",
                    "豆浆不含咖啡因，是替代咖啡的好选择，晚上应该能睡得踏实些。",
                ),
                ("phone_old", "我的手机是用了三年的华为P40，电池已经不太行了。", None),
                (
                    None,
                    "帮我想个正则，匹配11位的手机号？",
                    "可以用 ^1[3-9]\\d{9}$：以1开头，第二位是3到9，后面再跟9位数字。",
                ),
            ),
            S(
                "10:30 am on 15 April, 2023",
                ("cat", "我们上周日领养了一只橘猫，叫年糕！", "太可爱了！年糕适应得怎么样？"),
                (None, "它一直躲在沙发底下不肯出来。", None),
                ("manager", "我在星河科技的组长叫周航，他基本不管细节，我挺喜欢这种风格。", None),
                (
                    "badminton",
                    "我开始每周二和周四晚上打羽毛球了，就在公司附近的体育馆。",
                    "羽毛球很锻炼反应，打之前记得充分热身，保护好膝盖和手腕。",
                ),
                ("sister", "我姐姐林悦十月要在厦门办婚礼，我当伴娘。", None),
            ),
            S(
                "8:05 pm on 2 July, 2023",
                (
                    "move",
                    "告诉你个大消息：公司把我调到深圳分部了，月底就搬过去。",
                    "恭喜！过去之后还是做同样的工作吗？",
                ),
                (None, "对，岗位不变，深圳那边有个小团队。", None),
                ("phone_new", "顺便换了新手机，iPhone 14，旧的华为给我妈用了。", None),
                ("cantonese", "我每天晚上用App学粤语，已经连续打卡35天了。", None),
                (
                    "allergy",
                    "还有，我前阵子查出来对芒果过敏，嘴巴一碰就肿。",
                    "芒果过敏要小心，很多甜品和饮料里都有芒果，点单时记得问一下。",
                ),
                (None, "好了，我得去打包行李了。", "打包顺利！"),
            ),
            S(
                "11:20 am on 18 October, 2023",
                ("sz_home", "在深圳安顿下来了，在南山区租了个一室一厅，房租每月6800元。", None),
                (
                    "drink_new",
                    "说来好笑，我又开始喝咖啡了，不过只在中午前喝一杯美式。",
                    "中午前只喝一杯美式，对晚上睡眠的影响会小很多。",
                ),
                ("wedding", "我姐的婚礼特别好，我还上台致辞了，差点哭出来。", None),
                ("promotion", "还有，我上周升职成高级前端工程师了！", "恭喜！新职位工作内容有变化吗？"),
                (None, "带新人多了，写代码少了。", None),
            ),
        ),
        (
            q("third-person", "林晓在哪家公司上班？", "job"),
            q("third-person", "林晓的猫叫什么名字？", "cat"),
            q("third-person", "林晓的组长是谁？", "manager"),
            q("third-person", "用户对什么过敏？", "allergy"),
            q("third-person", "林晓在深圳的房租每月多少钱？", "sz_home"),
            q("paraphrase", "林晓从事哪方面的职业？", "job"),
            q("paraphrase", "因为失眠，林晓把早上的饮品换成了什么？", "coffee"),
            q("paraphrase", "她每周参加什么球类运动？", "badminton"),
            q("paraphrase", "为了适应新城市，林晓在学哪种方言？", "cantonese"),
            q("temporal", "林晓什么时候领养了年糕？", "cat"),
            q("temporal", "林晓什么时候得知要调到深圳？", "move"),
            q("temporal", "林晓什么时候升职的？", "promotion"),
            q("multi-hop", "林晓被调去了哪个城市，是哪家公司调的？", "move", "job"),
            q("multi-hop", "林晓在姐姐的厦门婚礼上做了什么？", "sister", "wedding"),
            upd("林晓现在住在哪里？", ("move", "sz_home"), ("city_old",)),
            upd("林晓现在早上喝什么？", ("drink_new",), ("coffee",)),
            upd("林晓现在用什么手机？", ("phone_new",), ("phone_old",)),
            upd("林晓现在的职位是什么？", ("promotion",), ("job",)),
            none("林晓最喜欢哪个乐队？", "乐队", "音乐", "歌"),
            none("林晓多大年纪？", "年纪", "岁", "生日"),
            none("林晓开什么车？", "车", "驾"),
            none("法国的首都是哪里？", "法国", "巴黎"),
        ),
    ),
    Conversation(
        "agent-zh-02",
        "",
        "assistant",
        (
            S(
                "7:40 am on 11 January, 2024",
                ("job", "我在南京一所初中教语文，今年带初二两个班。", "两个班的作文批改量应该不小吧？"),
                ("essays", "是啊，每周要改九十多篇作文，周末基本都搭进去了。", None),
                ("gym_old", "我办了小区门口那家力美健身的年卡，一年2680元。", None),
                (
                    "bp",
                    "体检查出来血压偏高，医生让我每天早上吃一片氨氯地平，5毫克。",
                    "氨氯地平一般每天固定时间吃一次，早上吃很方便记。",
                ),
                (None, "先这样，谢啦。", "不客气，回头聊！"),
            ),
            S(
                "9:15 pm on 26 February, 2024",
                ("swim", "我报了个成人游泳班，每周六上午在奥体中心学蛙泳。", "学游泳挺好的！现在能游多远了？"),
                (None, "还不行，只能扶着浮板漂一会儿。", None),
                (
                    "shoulder",
                    "上周三练器械的时候把右肩拉伤了，抬手都疼。",
                    "肩膀拉伤最好先停几天上肢训练，冰敷一下。",
                ),
                ("husband", "我老公叫许明，是消防员，经常值夜班。", None),
                ("son", "我儿子豆豆下个月8号满五岁，想给他办个恐龙主题的生日会。", None),
            ),
            S(
                "6:50 pm on 9 April, 2024",
                (
                    "gym_new",
                    "力美那家人太多了，我转到了单位旁边的乐动健身，按次付费，一次35元。",
                    "按次付费挺灵活的，适合时间不固定的人。",
                ),
                ("bp_dose", "复查的时候血压还是有点高，医生把氨氯地平加到了每天10毫克。", None),
                ("shoulder_ok", "肩膀好了，康复科的医生说可以慢慢恢复训练。", None),
                ("party", "豆豆的生日会办得特别成功，来了十二个小朋友。", "听起来很热闹！他最喜欢哪个礼物？"),
                (None, "一个会叫的霸王龙玩具，吵死了哈哈。", "哈哈，能想象那个画面。"),
            ),
            S(
                "10:05 am on 3 June, 2024",
                ("swim_done", "我终于能不扶板游完25米蛙泳了！", "太棒了！进步很快。"),
                ("school_trip", "学校安排我六月底带学生去西安研学，五天四晚。", None),
                (
                    "book",
                    "最近在读汪曾祺的散文集，每晚睡前读几篇。",
                    "汪曾祺写吃食的散文特别有味道，很适合睡前读。",
                ),
                ("job_new", "还有，我下学期要调去教初三了，压力又要大了。", "初三要中考，确实辛苦，加油！"),
            ),
        ),
        (
            q("third-person", "用户在哪个城市当老师？", "job"),
            q("third-person", "用户的老公叫什么名字？", "husband"),
            q("third-person", "用户每周要批改多少篇作文？", "essays"),
            q("third-person", "用户的儿子叫什么？", "son"),
            q("third-person", "用户最近在读谁的散文集？", "book"),
            q("paraphrase", "体检后医生让用户长期服用哪种药？", "bp"),
            q("paraphrase", "用户周末上午在学什么水上技能？", "swim"),
            q("paraphrase", "她在健身房训练时哪里受了伤？", "shoulder"),
            q("paraphrase", "她的丈夫从事什么职业？", "husband"),
            q("temporal", "用户什么时候拉伤了肩膀？", "shoulder"),
            q("temporal", "豆豆的生日会是什么时候办的？", "party"),
            q("temporal", "用户什么时候能独立游完25米的？", "swim_done"),
            q("multi-hop", "用户儿子的生日会来了多少个小朋友，是什么主题的？", "son", "party"),
            q("multi-hop", "用户在哪里学游泳，她现在能游多远？", "swim", "swim_done"),
            upd("用户现在去哪家健身房？", ("gym_new",), ("gym_old",)),
            upd("用户现在每天吃多少毫克氨氯地平？", ("bp_dose",), ("bp",)),
            upd("用户下学期教几年级？", ("job_new",), ("job",)),
            none("用户养宠物吗？", "宠物", "猫", "狗"),
            none("用户开车上班吗？", "车", "驾"),
            none("用户最喜欢哪支球队？", "球队", "足球", "篮球"),
            none("珠穆朗玛峰有多高？", "珠穆朗玛", "珠峰"),
        ),
    ),
    Conversation(
        "agent-zh-03",
        "陈杰",
        "",
        (
            S(
                "8:20 pm on 14 May, 2023",
                (
                    "kids",
                    "我有两个孩子，老大陈一诺七岁，老二陈一帆刚满三岁。",
                    "两个孩子挺热闹！他们最近喜欢玩什么？",
                ),
                ("kids_like", "一诺迷上了乐高，一帆天天要画画。", None),
                ("school", "一诺在徐汇区的向阳小学上二年级。", None),
                ("rent", "我们现在在徐汇租房，两室一厅，房租每月9500元，有点挤。", None),
                (
                    "wife",
                    "我老婆周敏在医院当药剂师，经常倒班，接送孩子主要靠我。",
                    "医院倒班加上接送孩子，确实很考验时间安排。",
                ),
                (None, "不好意思，说多了。", "没关系，这些背景很有用。"),
            ),
            S(
                "3:30 pm on 2 July, 2023",
                ("car", "我上周提了新车，比亚迪海豹，车牌号是沪A·7K329。", "恭喜提车！开着感觉怎么样？"),
                (None, "挺安静的，就是充电桩不好找。", None),
                ("down_payment", "我们在看闵行的房子，首付打算出180万。", None),
                ("mom", "我妈下个月要来上海帮我们带孩子，住三个月。", None),
                (
                    "peanut",
                    "一帆上周查出花生过敏，现在出门都带着抗过敏药。",
                    "花生过敏要记得告诉幼儿园老师，很多零食里也有花生成分。",
                ),
            ),
            S(
                "10:00 am on 9 September, 2023",
                ("house", "房子定下来了！闵行莘庄的三室两厅，月供每月一万二。", "恭喜！什么时候搬家？"),
                ("move_date", "十月国庆假期搬。", None),
                ("job", "我在一家外企做财务经理，最近在忙年中审计。", None),
                ("swim_kid", "一诺开始学游泳了，每周日下午上课。", None),
                (None, "哈哈，扯远了。", "哈哈，没事，随便聊。"),
            ),
            S(
                "9:10 pm on 25 November, 2023",
                ("moved", "已经搬进莘庄的新家了，一诺也转到了家附近的莘城小学。", "转学适应得怎么样？"),
                (None, "比我想的好，交了两个新朋友。", None),
                ("job_new", "另外我跳槽了，下个月去一家券商做财务总监。", "恭喜！新工作离家近吗？"),
                ("commute", "坐地铁5号线四十分钟左右。", None),
                ("mom_leave", "我妈上周回老家了，现在改请钟点工阿姨，每周来三次。", None),
            ),
        ),
        (
            q("third-person", "陈杰的车牌号是多少？", "car"),
            q("third-person", "陈杰的老婆叫什么，做什么工作？", "wife"),
            q("third-person", "陈杰家老大叫什么名字？", "kids"),
            q("third-person", "陈杰在徐汇租的房子每月房租多少？", "rent"),
            q("third-person", "陈杰买房打算付多少首付？", "down_payment"),
            q("paraphrase", "陈杰家哪个孩子碰不得某种坚果？", "peanut"),
            q("paraphrase", "陈杰最近买了什么新能源座驾？", "car"),
            q("paraphrase", "陈杰在公司负责哪方面的工作？", "job"),
            q("paraphrase", "谁会来上海帮陈杰家看娃？", "mom"),
            q("temporal", "陈杰什么时候提的新车？", "car"),
            q("temporal", "陈杰家什么时候定下了莘庄的房子？", "house"),
            q("temporal", "陈杰的妈妈什么时候回的老家？", "mom_leave"),
            q("multi-hop", "陈杰的新房月供多少，当初打算付多少首付？", "house", "down_payment"),
            q("multi-hop", "陈杰的妈妈来上海住了一阵，她走后家里改请了谁帮忙？", "mom", "mom_leave"),
            upd("陈杰一家现在住在哪里？", ("house", "moved"), ("rent",)),
            upd("一诺现在在哪所小学上学？", ("moved",), ("school",)),
            upd("陈杰现在在哪工作？", ("job_new",), ("job",)),
            none("陈杰养宠物吗？", "宠物", "猫", "狗"),
            none("陈杰的血型是什么？", "血型"),
            none("他喜欢喝什么酒？", "酒"),
            none("陈杰平时玩什么游戏？", "游戏"),
            none("光速是多少？", "光速"),
        ),
    ),
    Conversation(
        "agent-zh-04",
        "",
        "",
        (
            S(
                "4:45 pm on 12 September, 2023",
                (
                    "program",
                    "我刚开学，在浙大读计算机硕士，方向是自然语言处理。",
                    "恭喜开学！导师已经定下来了吗？",
                ),
                ("advisor", "定了，是何教授，组里一共八个人。", None),
                ("dorm", "我住玉泉校区的研究生宿舍，四人间。", None),
                (
                    "laptop_old",
                    "我用的还是本科时买的联想小新，跑模型特别慢。",
                    "跑模型的话，可以先用学校的GPU服务器，笔记本主要用来写代码。",
                ),
                ("part_time", "每周六在一家机构兼职教高中数学，一节课200元。", None),
            ),
            S(
                "11:30 am on 28 October, 2023",
                ("dog", "我家里那只柯基叫可乐，今年三岁了，放假回家最想它。", "可乐是什么颜色的？"),
                (None, "黄白色的，特别胖。", "哈哈，柯基胖起来很可爱。"),
                ("paper", "我在写第一篇论文，想投明年的ACL。", None),
                (
                    "eyes",
                    "最近眼睛干涩得厉害，校医院开了玻璃酸钠滴眼液。",
                    "玻璃酸钠滴眼液能缓解干涩，也记得每用眼四十分钟休息一下。",
                ),
                ("account", "组里给我分的服务器账号是nlp-stu07。", None),
            ),
            S(
                "9:00 pm on 5 January, 2024",
                ("laptop_new", "用奖学金换了台MacBook Air M2，旧联想留着当备用。", "新电脑用着顺手吗？"),
                (None, "还在适应快捷键。", None),
                ("scholarship", "这学期拿了一等学业奖学金，8000元。", None),
                ("exam", "下周有《机器学习》期末考试，复习得头都大了。", "期末加油！可以先把往年题过一遍。"),
                ("home", "寒假打算回成都过年，已经抢到了1月28号的高铁票。", None),
            ),
            S(
                "2:20 pm on 16 March, 2024",
                ("rent_out", "我搬出宿舍了，在学校西门外和师兄合租，每月2200元。", "校外住通勤方便吗？"),
                ("ebike", "骑电动车十分钟就到实验室。", None),
                ("paper_done", "论文投出去了！最后改投的是EMNLP，没赶上ACL。", "投出去就是胜利，等审稿结果吧。"),
                ("part_time_new", "兼职换成了给一家公司做数据标注审核，可以在家远程做。", None),
                (None, "好啦，去实验室了。", "好的，加油！"),
            ),
        ),
        (
            q("third-person", "用户在哪所学校读研？", "program"),
            q("third-person", "用户的导师是谁？", "advisor"),
            q("third-person", "用户家的柯基叫什么名字？", "dog"),
            q("third-person", "用户的服务器账号是什么？", "account"),
            q("third-person", "用户拿了多少钱的奖学金？", "scholarship"),
            q("paraphrase", "用户研究的是哪个领域？", "program"),
            q("paraphrase", "用户用什么缓解眼部不适？", "eyes"),
            q("paraphrase", "他周末做什么赚外快？", "part_time"),
            q("paraphrase", "用户春节前回家乘坐什么交通工具？", "home"),
            q("temporal", "用户什么时候开学读研的？", "program"),
            q("temporal", "用户什么时候拿到奖学金的？", "scholarship"),
            q("temporal", "用户什么时候把论文投出去的？", "paper_done"),
            q("multi-hop", "用户原本想投哪个会议，最终投了哪个？", "paper", "paper_done"),
            q("multi-hop", "用户导师组里有几个人，组里给他分的服务器账号是什么？", "advisor", "account"),
            upd("用户现在住在哪里？", ("rent_out",), ("dorm",)),
            upd("用户现在主要用什么笔记本电脑？", ("laptop_new",), ("laptop_old",)),
            upd("用户现在做什么兼职？", ("part_time_new",), ("part_time",)),
            none("用户有女朋友吗？", "女朋友", "对象", "恋爱"),
            none("用户会弹什么乐器？", "乐器", "弹", "琴"),
            none("用户每个月生活费多少？", "生活费"),
            none("水的沸点是多少度？", "沸点"),
        ),
    ),
    Conversation(
        "agent-zh-05",
        "王芳",
        "assistant",
        (
            S(
                "10:30 am on 6 March, 2023",
                (None, "我女儿帮我装的这个，我还不太会用，你多担待。", "没问题，慢慢来。"),
                ("retired", "我去年从会计岗位退休了，在纺织厂干了三十二年。", "恭喜退休！平时都怎么安排时间？"),
                ("dance", "每天晚上七点去小区广场跳广场舞。", None),
                ("grandkid", "周一到周五还要帮女儿带外孙女朵朵，她上幼儿园中班。", None),
                (
                    "bp",
                    "我有高血压，每天早上吃一片硝苯地平控释片，30毫克。",
                    "硝苯地平控释片要整片吞服，不能掰开或者嚼碎。",
                ),
            ),
            S(
                "3:15 pm on 17 April, 2023",
                ("glasses", "上周配了副老花镜，花了680元，看手机清楚多了。", "配得合适很重要，看手机也别太久哦。"),
                ("volunteer", "我在社区图书室当志愿者，每周二上午值班。", None),
                ("garden", "阳台上种了几盆月季和一棵柠檬树。", "月季喜欢阳光，阳台朝南的话会开得很好。"),
                (None, "就是柠檬一直不结果。", None),
                ("daughter", "我女儿王琳在苏州工业园区上班，是做人事的。", None),
            ),
            S(
                "4:00 pm on 21 June, 2023",
                ("bp_new", "医生把我的硝苯地平换成了缬沙坦，每天80毫克。", None),
                ("trip", "我和几个老姐妹约好了九月去新疆旅游，报了个十二天的团。", "九月的新疆瓜果正甜，风景也好。"),
                ("dance_team", "我们广场舞队要参加区里的比赛，我负责领舞。", None),
                ("duoduo", "朵朵上周六过了五岁生日，在家吃了蛋糕。", None),
            ),
            S(
                "11:45 am on 8 October, 2023",
                ("trip_done", "新疆回来了，最喜欢喀纳斯，湖水颜色像翡翠一样。", None),
                ("volunteer_new", "图书室的值班改到周四下午了。", None),
                (
                    "cataract",
                    "眼科医生说我右眼有白内障，约了12月5号做手术。",
                    "希望手术顺利。术后有人在家照顾你吗？",
                ),
                ("help", "女儿说请一个星期假回来陪我。", None),
                (None, "她就是爱操心，不过有人陪着也挺好。", None),
            ),
        ),
        (
            q("third-person", "王芳退休前在哪里工作？", "retired"),
            q("third-person", "王芳在哪里当志愿者？", "volunteer"),
            q("third-person", "王芳的外孙女叫什么名字？", "grandkid"),
            q("third-person", "王芳配老花镜花了多少钱？", "glasses"),
            q("third-person", "王芳阳台上种了什么？", "garden"),
            q("third-person", "王芳的女儿叫什么？", "daughter"),
            q("paraphrase", "王芳傍晚有什么固定的娱乐健身活动？", "dance"),
            q("paraphrase", "王芳的女儿从事哪类职业？", "daughter"),
            q("paraphrase", "王芳在西北旅行时最喜欢的地方是哪里？", "trip_done"),
            q("paraphrase", "她视力方面查出了什么病？", "cataract"),
            q("temporal", "王芳什么时候配的老花镜？", "glasses"),
            q("temporal", "王芳的白内障手术安排在什么时候？", "cataract"),
            q("temporal", "朵朵什么时候过的五岁生日？", "duoduo"),
            q("multi-hop", "王芳做完手术后谁来陪她，这个人在哪里上班？", "help", "daughter"),
            q("multi-hop", "王芳和谁一起去了新疆，最喜欢那里的哪个地方？", "trip", "trip_done"),
            upd("王芳现在吃什么降压药？", ("bp_new",), ("bp",)),
            upd("王芳现在哪天在图书室值班？", ("volunteer_new",), ("volunteer",)),
            none("王芳的老伴叫什么名字？", "老伴", "丈夫", "老公"),
            none("王芳会开车吗？", "车", "驾"),
            none("她养猫吗？", "猫"),
            none("长城有多长？", "长城"),
        ),
    ),
    Conversation(
        "agent-zh-06",
        "",
        "assistant",
        (
            S(
                "9:20 pm on 4 August, 2023",
                ("job", "我在招商银行做后端开发，主要写Java。", "银行的系统对稳定性要求应该很高吧？"),
                (None, "对，上线流程特别长。", None),
                ("editor_old", "我写代码一直用IntelliJ IDEA，快捷键用的是Eclipse那套。", None),
                (
                    "nas",
                    "家里装了台群晖DS920+，四块4TB硬盘，做了RAID5。",
                    "RAID5能容忍一块硬盘坏掉，但重要数据最好还是另外备份一份。",
                ),
                ("router", "路由器是小米AX6000，管理后台地址我改成了192.168.8.1。", None),
            ),
            S(
                "8:10 pm on 19 September, 2023",
                ("distro_old", "我在旧笔记本上装了Ubuntu 22.04，当家里的小服务器用。", None),
                (
                    "ha",
                    "最近在折腾Home Assistant，把客厅的灯和空调都接进去了。",
                    "Home Assistant的自动化很灵活，可以试试按时间或者温度来触发。",
                ),
                ("ssh", "SSH端口改成了2222，只允许密钥登录。", None),
                (
                    "keyboard",
                    "新买了一把静电容键盘，HHKB Professional，手感很棒。",
                    "HHKB的布局有点特别，刚开始可能要适应一下Ctrl键的位置。",
                ),
                (None, "哈哈，又乱花钱了。", "偶尔奖励一下自己也不错。"),
            ),
            S(
                "10:40 pm on 30 November, 2023",
                (
                    "editor_new",
                    "我从IDEA换到了Neovim，配了LazyVim，感觉飞快。",
                    "从IDE转到Neovim要适应一阵，你最想念IDEA的什么功能？",
                ),
                (None, "重构和调试吧，别的都还好。", None),
                ("distro_new", "小服务器上的Ubuntu我重装成了Debian 12，更省资源。", None),
                ("backup", "我给NAS设置了每周日凌晨三点自动备份到阿里云OSS。", None),
                (
                    "wrist",
                    "最近右手腕疼，医生说是腱鞘炎，让我少用鼠标。",
                    "腱鞘炎要多休息，可以试试垂直鼠标，减轻手腕的压力。",
                ),
            ),
            S(
                "7:55 pm on 14 February, 2024",
                ("job_new", "我从招行离职了，下周一去字节跳动做基础架构。", "恭喜！新岗位还是写Java吗？"),
                ("lang", "不是，主要写Go了。", None),
                ("router_new", "家里路由器换成了华硕RT-BE88U，支持WiFi 7。", None),
                ("mouse", "听你的建议买了罗技的垂直鼠标，手腕好多了。", None),
            ),
        ),
        (
            q("third-person", "用户的NAS是什么型号？", "nas"),
            q("third-person", "用户把SSH端口改成了多少？", "ssh"),
            q("third-person", "用户买了什么键盘？", "keyboard"),
            q("third-person", "用户的NAS每周什么时候自动备份，备份到哪里？", "backup"),
            q("third-person", "用户在银行主要写什么语言？", "job"),
            q("paraphrase", "用户原来在哪家金融机构上班？", "job"),
            q("paraphrase", "他的手部出了什么毛病？", "wrist"),
            q("paraphrase", "用户用什么平台控制家里的智能家电？", "ha"),
            q("paraphrase", "用户家的网络存储用了哪种磁盘阵列方案？", "nas"),
            q("temporal", "用户什么时候换到Neovim的？", "editor_new"),
            q("temporal", "用户什么时候开始手腕疼的？", "wrist"),
            q("temporal", "用户什么时候决定去字节跳动？", "job_new"),
            q("multi-hop", "用户为了缓解哪种病买了什么鼠标？", "wrist", "mouse"),
            q("multi-hop", "用户的小服务器是用什么设备改的，现在装的是什么系统？", "distro_old", "distro_new"),
            upd("用户现在用什么编辑器写代码？", ("editor_new",), ("editor_old",)),
            upd("用户家的小服务器现在跑的是什么系统？", ("distro_new",), ("distro_old",)),
            upd("用户家现在用什么路由器？", ("router_new",), ("router",)),
            upd("用户现在在哪家公司工作？", ("job_new",), ("job",)),
            none("用户的生日是哪天？", "生日"),
            none("用户结婚了吗？", "结婚", "老婆", "妻子", "丈夫"),
            none("用户喜欢看什么电影？", "电影"),
            none("地球离太阳有多远？", "地球", "太阳"),
        ),
    ),
    Conversation(
        "agent-zh-07",
        "赵磊",
        "",
        (
            S(
                "11:00 am on 20 February, 2023",
                ("job", "我在上海一家本帮菜馆当厨师长，干了快八年了。", "八年可不短！你最拿手的是哪道菜？"),
                ("dish", "红烧肉和腌笃鲜，老客人都是冲这两道来的。", None),
                (
                    "dream",
                    "一直想自己开一家面馆，做苏式汤面。",
                    "苏式汤面讲究汤头和浇头，自己开店的话可以把汤头做成招牌。",
                ),
                ("savings", "为了开店我存了差不多45万。", None),
                ("back", "长期站着炒菜，腰椎间盘突出有好几年了。", None),
                (None, "哈哈，厨师的职业病。", "确实，后厨的工作很辛苦。"),
            ),
            S(
                "9:30 pm on 5 May, 2023",
                ("shop_plan", "看中了静安区一个铺面，三十平，月租一万八。", "位置怎么样？人流量大吗？"),
                (None, "旁边就是写字楼，中午人很多。", None),
                ("loan", "跟银行谈了一笔30万的经营贷，年利率3.85%。", None),
                ("partner", "我表弟赵凯会跟我一起干，他负责前厅和外卖。", None),
                ("quit", "我跟老板提了辞职，干到五月底。", "提前说好交接，和老东家也能好聚好散。"),
            ),
            S(
                "3:40 pm on 18 July, 2023",
                ("open", "面馆开业了！名字叫“磊记面馆”，7月8号开的张。", "恭喜开业！第一周生意怎么样？"),
                ("sales", "每天能卖两百多碗，中午最忙。", None),
                ("menu", "招牌是焖肉面，一碗28元。", "焖肉面配苏式红汤最经典，28元的价格也很实在。"),
                ("broth", "每天早上四点起来熬汤，睡眠严重不足。", None),
                ("back_again", "腰又犯了，去推拿了两次。", None),
            ),
            S(
                "10:15 pm on 26 October, 2023",
                ("branch", "生意不错，准备在徐汇开第二家分店，年底开业。", "发展得真快！第二家店谁来管？"),
                ("manager", "让赵凯去当店长，静安这边我自己盯着。", None),
                ("menu_new", "招牌换成了虾仁拌面，秋天河虾便宜，卖38元一碗。", None),
                ("loan_paid", "那笔30万的经营贷已经还了一半。", None),
            ),
        ),
        (
            q("third-person", "赵磊开的面馆叫什么名字？", "open"),
            q("third-person", "赵磊的表弟叫什么名字？", "partner"),
            q("third-person", "赵磊为了开店存了多少钱？", "savings"),
            q("third-person", "赵磊的面馆一天能卖多少碗？", "sales"),
            q("third-person", "赵磊在静安看中的铺面月租多少？", "shop_plan"),
            q("paraphrase", "赵磊以前在什么样的餐厅掌勺？", "job"),
            q("paraphrase", "他长年有什么脊柱方面的毛病？", "back"),
            q("paraphrase", "赵磊找金融机构借了多少钱开店？", "loan"),
            q("paraphrase", "赵磊每天天不亮就要为店里做什么准备？", "broth"),
            q("temporal", "赵磊的面馆什么时候开业的？", "open"),
            q("temporal", "赵磊什么时候向老板提的辞职？", "quit"),
            q("temporal", "赵磊什么时候决定开第二家店？", "branch"),
            q("multi-hop", "赵磊的第二家店由谁管理，这个人原本在店里负责什么？", "manager", "partner"),
            q("multi-hop", "赵磊借的经营贷是多少钱，现在还了多少？", "loan", "loan_paid"),
            upd("赵磊的面馆现在的招牌面是什么？", ("menu_new",), ("menu",)),
            upd("赵磊现在做什么工作？", ("open",), ("job",)),
            none("赵磊结婚了吗？", "结婚", "老婆", "妻子"),
            none("赵磊最喜欢哪支足球队？", "足球", "球队"),
            none("赵磊的血型是什么？", "血型"),
            none("赵磊住在哪个小区？", "小区"),
            none("日本的首都是哪里？", "日本", "东京"),
        ),
    ),
    Conversation(
        "agent-zh-08",
        "",
        "",
        (
            S(
                "2:30 pm on 10 April, 2023",
                ("baby", "我上个月生了个女儿，小名叫团子，出生时3.2公斤。", "恭喜！团子晚上睡得怎么样？"),
                ("night", "每隔两三个小时就醒一次，我快熬不住了。", None),
                ("leave", "我的产假一共158天，到八月底结束。", None),
                ("job", "我在一家广告公司做文案策划。", None),
                (
                    "formula_old",
                    "奶水不太够，现在混合喂养，奶粉用的是飞鹤星飞帆。",
                    "混合喂养很常见，奶粉按说明冲调就好，量可以跟儿科医生确认一下。",
                ),
            ),
            S(
                "10:20 am on 29 May, 2023",
                (
                    "vaccine",
                    "团子打了第二针乙肝疫苗，回家后有点低烧。",
                    "打疫苗后低烧比较常见，注意观察体温，多喂点水。",
                ),
                ("pediatrician", "我们固定找妇幼保健院的孙医生看，她特别耐心。", None),
                ("husband", "孩子她爸叫韩涛，在外地做工程项目，一个月回来一次。", None),
                ("nanny_old", "请了个月嫂，姓吴，一个月一万三。", None),
                (None, "唉，说着说着就想哭。", "辛苦了，照顾新生儿真的很累，你已经做得很好了。"),
            ),
            S(
                "9:45 pm on 14 August, 2023",
                ("formula_new", "团子喝星飞帆老是便秘，换成了美赞臣的蓝臻。", None),
                (
                    "nanny_new",
                    "月嫂合同到期了，现在换成白天的育儿嫂，姓黄，一个月七千。",
                    "有育儿嫂白天帮忙，你也能轻松一些。",
                ),
                (
                    "back_work",
                    "我下个月一号就回公司上班了，有点舍不得团子。",
                    "刚回去上班会有些不舍，慢慢会适应的。",
                ),
                ("pump", "买了个吸奶器，打算在公司背奶。", None),
            ),
            S(
                "8:00 pm on 3 November, 2023",
                ("teeth", "团子长出了第一颗牙，下面的门牙！", "好可爱！她最近会翻身了吗？"),
                (None, "早就会了，现在在练坐。", None),
                ("job_new", "我转岗了，从文案策划调到了品牌组做项目经理，不用天天加班了。", None),
                ("weight", "我产后体重降到了54公斤，还差四公斤回到孕前。", None),
                (
                    "yoga",
                    "每周三晚上去上产后修复瑜伽。",
                    "产后修复瑜伽对腹直肌恢复很有帮助，动作要量力而行。",
                ),
            ),
        ),
        (
            q("third-person", "用户女儿的小名叫什么？", "baby"),
            q("third-person", "用户的产假有多少天？", "leave"),
            q("third-person", "用户带孩子看病固定找哪位医生？", "pediatrician"),
            q("third-person", "用户的老公叫什么名字？", "husband"),
            q("third-person", "用户请的月嫂一个月多少钱？", "nanny_old"),
            q("paraphrase", "团子刚来到这个世界时有多重？", "baby"),
            q("paraphrase", "用户原本的职业是什么？", "job"),
            q("paraphrase", "孩子的父亲为什么不常在家？", "husband"),
            q("paraphrase", "她回公司后打算怎么继续给孩子喂母乳？", "pump"),
            q("temporal", "团子什么时候打的第二针乙肝疫苗？", "vaccine"),
            q("temporal", "团子什么时候长出第一颗牙？", "teeth"),
            q("temporal", "用户什么时候说自己要回公司上班？", "back_work"),
            q("multi-hop", "团子换奶粉之前喝的是什么，为什么换？", "formula_old", "formula_new"),
            q("multi-hop", "用户的产假本来到什么时候结束，她实际哪天回去上班？", "leave", "back_work"),
            upd("团子现在喝什么奶粉？", ("formula_new",), ("formula_old",)),
            upd("现在是谁在帮用户带孩子？", ("nanny_new",), ("nanny_old",)),
            upd("用户现在在公司做什么岗位？", ("job_new",), ("job",)),
            none("用户住在哪个小区？", "小区"),
            none("用户养宠物吗？", "宠物", "猫", "狗"),
            none("用户喜欢读什么书？", "书", "阅读"),
            none("月球绕地球一圈要多久？", "月球", "地球"),
        ),
    ),
    Conversation(
        "agent-zh-09",
        "刘婷",
        "assistant",
        (
            S(
                "8:50 pm on 7 June, 2023",
                ("job", "我在广州一家律所做律师助理，明年想拿律师执业证。", "为执业做准备挺好的！在备考法考吗？"),
                ("exam", "对，今年九月考法考客观题，每天下班刷两小时题。", None),
                ("salary", "我现在月薪税前一万一，每个月存四千。", None),
                (
                    "fund",
                    "我每个月定投1000元沪深300指数基金。",
                    "指数基金定投适合长期坚持，短期波动不用太在意。",
                ),
                ("bank_old", "工资卡是工商银行的，尾号8826。", None),
                (None, "哈哈，感觉自己像个守财奴。", "存钱是好习惯，可不是守财奴。"),
            ),
            S(
                "1:10 pm on 15 July, 2023",
                ("japan_plan", "十月想去日本玩一周，大阪和京都。", "十月去日本正好，天气凉快。签证办了吗？"),
                ("visa", "在办了，单次旅游签，旅行社收了580元。", None),
                ("passport", "护照号是E81234567，有效期到2031年。", None),
                ("roommate", "我和大学同学苏晴合租在天河区，两室一厅，每人每月2600元。", None),
                (
                    "insurance",
                    "给自己买了一份百万医疗险，一年386元。",
                    "百万医疗险性价比很高，记得看清免赔额和报销范围。",
                ),
            ),
            S(
                "9:30 pm on 25 October, 2023",
                (
                    "japan_done",
                    "日本回来了，最难忘的是在京都伏见稻荷大社爬山看千本鸟居。",
                    "听起来很美！有拍到好看的照片吗？",
                ),
                (None, "拍了几百张，还没来得及修。", None),
                ("exam_result", "法考客观题过了！十一月考主观题。", "恭喜！主观题也要加油。"),
                ("bank_new", "工资卡换成了招商银行，公司统一换的，尾号3071。", None),
                ("fund_new", "基金定投从每月1000元加到了1500元。", None),
            ),
            S(
                "11:05 am on 20 January, 2024",
                ("pass", "主观题也过了，法考通过了！", "太厉害了！下一步是实习吗？"),
                ("intern", "对，要在律所实习满一年才能申请执业证。", None),
                ("move", "苏晴回老家了，我搬到了海珠区一个单间，月租3200元。", None),
                ("cat", "搬家后养了只英短蓝猫，叫芝麻。", None),
            ),
        ),
        (
            q("third-person", "刘婷在律所做什么？", "job"),
            q("third-person", "刘婷的护照号是多少？", "passport"),
            q("third-person", "刘婷在天河区和谁合租？", "roommate"),
            q("third-person", "刘婷的猫叫什么名字？", "cat"),
            q("third-person", "刘婷办日本签证花了多少钱？", "visa"),
            q("paraphrase", "刘婷每个月能攒下多少钱？", "salary"),
            q("paraphrase", "刘婷在日本印象最深的是哪个景点？", "japan_done"),
            q("paraphrase", "她正在准备什么资格考试？", "exam"),
            q("paraphrase", "刘婷给自己买了什么保障？", "insurance"),
            q("temporal", "刘婷什么时候通过法考客观题的？", "exam_result"),
            q("temporal", "刘婷什么时候从日本旅游回来的？", "japan_done"),
            q("temporal", "刘婷什么时候开始养芝麻的？", "cat"),
            q("multi-hop", "刘婷日本之行去了哪两个城市，最难忘的是什么？", "japan_plan", "japan_done"),
            q("multi-hop", "刘婷以前和谁合租，那个人后来怎么了？", "roommate", "move"),
            upd("刘婷的工资卡现在是哪家银行的？", ("bank_new",), ("bank_old",)),
            upd("刘婷现在每月定投多少钱？", ("fund_new",), ("fund",)),
            upd("刘婷现在住在哪里？", ("move",), ("roommate",)),
            none("刘婷有男朋友吗？", "男朋友", "对象", "恋爱"),
            none("刘婷的车牌号是多少？", "车"),
            none("刘婷喜欢什么运动？", "运动", "健身", "跑步"),
            none("刘婷的生日是哪天？", "生日"),
            none("中国有多少个省级行政区？", "省级", "行政区"),
        ),
    ),
    Conversation(
        "agent-zh-10",
        "",
        "",
        (
            S(
                "6:30 pm on 2 September, 2023",
                (
                    "dog",
                    "我养了一只边牧，叫豆包，两岁，精力多得用不完。",
                    "边牧需要很大的运动量，你每天遛它多久？",
                ),
                ("walk", "早晚各一小时，周末带它去公园玩飞盘。", None),
                ("commute_old", "我每天坐地铁2号线上班，单程五十分钟。", None),
                ("job", "我在成都一家游戏公司做UI设计。", None),
                (
                    "guitar",
                    "最近开始自学吉他，每天练半小时，手指疼死了。",
                    "刚学吉他手指疼很正常，长出茧子就好了。",
                ),
            ),
            S(
                "10:10 am on 21 October, 2023",
                ("reno", "我买的二手房准备装修了，找了一家叫匠心家装的公司，预算25万。", "装修是大工程！工期多久？"),
                ("reno_time", "合同写的是四个月，争取过年前搬进去。", None),
                ("vet", "豆包打疫苗的宠物医院是高新区的瑞派，医生姓冯。", None),
                (
                    "style",
                    "我想装成原木风，客厅不放电视，做一整面书墙。",
                    "原木风搭配书墙很温馨，书架记得做好承重。",
                ),
                (None, "唉，钱包又要瘦了。", "装修确实花钱，做好预算就不慌。"),
            ),
            S(
                "7:20 pm on 16 December, 2023",
                (
                    "commute_new",
                    "我不坐地铁了，买了辆九号电动车，骑车二十五分钟到公司。",
                    "骑电动车记得戴头盔哦。",
                ),
                (
                    "allergy",
                    "豆包最近皮肤过敏，医生说是对鸡肉过敏，换了鱼肉配方的狗粮。",
                    "鱼肉配方的狗粮对容易过敏的狗狗比较友好。",
                ),
                ("guitar_song", "吉他终于能弹完整首《晴天》了！", None),
                ("reno_delay", "装修延期了，瓷砖到货晚了，估计要拖到三月。", None),
            ),
            S(
                "9:00 pm on 10 March, 2024",
                ("moved", "终于搬进新家了！在金牛区，离公司更近了。", "恭喜乔迁！豆包适应新家了吗？"),
                (None, "它第一天到处闻，现在已经把沙发当成自己的了。", None),
                ("guitar_class", "我报了个吉他班，每周六下午上课，学指弹。", None),
                ("budget", "装修最后花了28万，超了三万。", None),
                ("job_new", "我跳槽到了另一家游戏公司做主美。", "恭喜！负责的是什么类型的游戏？"),
                (None, "一款二次元卡牌手游。", None),
            ),
        ),
        (
            q("third-person", "用户的狗叫什么名字？", "dog"),
            q("third-person", "用户家装修找的是哪家公司？", "reno"),
            q("third-person", "豆包在哪家宠物医院打疫苗？", "vet"),
            q("third-person", "用户第一首能完整弹下来的歌是什么？", "guitar_song"),
            q("third-person", "用户装修最后花了多少钱？", "budget"),
            q("paraphrase", "用户养的是什么品种的犬？", "dog"),
            q("paraphrase", "他原来在游戏公司负责什么？", "job"),
            q("paraphrase", "用户的新家客厅打算怎么布置？", "style"),
            q("paraphrase", "豆包吃了什么会皮肤出问题？", "allergy"),
            q("temporal", "用户什么时候搬进新家的？", "moved"),
            q("temporal", "用户什么时候开始骑电动车上班的？", "commute_new"),
            q("temporal", "用户什么时候开始自学吉他的？", "guitar"),
            q("multi-hop", "用户装修预算是多少，最后超了多少？", "reno", "budget"),
            q("multi-hop", "用户的装修原定多久，后来为什么延期？", "reno_time", "reno_delay"),
            upd("用户现在怎么上班？", ("commute_new",), ("commute_old",)),
            upd("用户现在在游戏公司做什么职位？", ("job_new",), ("job",)),
            upd("用户现在怎么学吉他？", ("guitar_class",), ("guitar",)),
            none("用户有兄弟姐妹吗？", "兄弟", "姐妹", "哥哥", "姐姐", "弟弟", "妹妹"),
            none("用户的血型是什么？", "血型"),
            none("用户喜欢喝什么茶？", "茶"),
            none("澳大利亚的首都是哪里？", "澳大利亚", "堪培拉"),
        ),
    ),
)


# ------------------------------------------------------------------------------------------------ layout
def _fail(conv_id: str, message: str) -> SystemExit:
    return SystemExit(f"make_agent_dev_zh: {conv_id}: {message}")


def _session_lines(lines: tuple[Line, ...], rng: random.Random, used: set[str]) -> list[Line]:
    """A session's user turns with an opener / closer exchange added where the draw says so (never one that the
    conversation already used, never next to a chit-chat turn of its own)."""
    out = list(lines)
    if lines[0][0] is not None and rng.random() < 0.5:
        opener = next(o for o in _shuffled(OPENERS, rng) if o[0] not in used)
        used.add(opener[0])
        out.insert(0, (None, opener[0], opener[1]))
    if lines[-1][0] is not None and lines[-1][2] is None and rng.random() < 0.6:
        closer = next(c for c in _shuffled(CLOSERS, rng) if c[0] not in used)
        used.add(closer[0])
        out.append((None, closer[0], closer[1]))
    return out


def _check_dates(conv: Conversation) -> None:
    """Session dates parse in the evaluation's format and strictly increase (one date per session)."""
    try:
        times = [datetime.strptime(when, "%I:%M %p on %d %B, %Y") for when, _ in conv.sessions]
    except ValueError as exc:
        raise _fail(conv.conv_id, f"bad session_date_time: {exc}") from None
    if any(a.date() >= b.date() for a, b in zip(times, times[1:], strict=False)):
        raise _fail(conv.conv_id, "session dates not strictly increasing")


def build(conv: Conversation) -> tuple[list[dict], list[dict], dict[str, tuple[int, str]]]:
    """Lay out one conversation: the rows of turns.jsonl, of qa.jsonl, and ``{fact key: (session, dia_id)}``.

    Raises:
        SystemExit: a repeated key, a session count outside 3..5, bad dates, or a question that fails its check.
    """
    if not 3 <= len(conv.sessions) <= 5:
        raise _fail(conv.conv_id, f"{len(conv.sessions)} sessions (3..5 expected)")
    _check_dates(conv)
    rng = random.Random(f"{SEED}:{conv.conv_id}")
    rows: list[dict] = []
    where: dict[str, tuple[int, str]] = {}
    used: set[str] = set()
    last_ack = ""
    for s, (when, lines) in enumerate(conv.sessions, start=1):
        n = 0
        for key, text, reply in _session_lines(lines, rng, used):
            n += 1
            rows.append(_turn(conv, s, n, when, "user", text))
            if key is not None:
                if key in where:
                    raise _fail(conv.conv_id, f"fact key {key!r} repeated")
                where[key] = (s, f"D{s}:{n}")
            if reply is None:
                reply = rng.choice([a for a in ACKS if a != last_ack])
                last_ack = reply
            n += 1
            rows.append(_turn(conv, s, n, when, "assistant", reply))
    return rows, _questions(conv, where, rows), where


def occurs(word: str, text: str) -> bool:
    """Whether ``word`` occurs in ``text`` (lower-cased): an ASCII word as a whole word (not inside a longer run of
    Latin letters or digits; a Chinese character next to it is a boundary, which ``\\b`` would not see), a Chinese
    word anywhere (Chinese has no spaces between words, so a substring is the strict test)."""
    word = word.lower()
    if re.fullmatch(r"[\x00-\x7f]+", word):
        return re.search(rf"(?<![0-9a-z]){re.escape(word)}(?![0-9a-z])", text) is not None
    return word in text


def _question_problem(category: str, question: str, keys: tuple[str, ...], extra: tuple[str, ...], where, text):
    """Why a question fails its check (module docstring), or ``None``."""
    if category not in CATEGORIES:
        return f"unknown category {category!r}"
    unknown = [k for k in (*keys, *(extra if category == "updated" else ())) if k not in where]
    if unknown:
        return f"unknown key(s) {unknown}"
    if category == "unanswerable":
        found = [w for w in extra if occurs(w, text)]
        if keys or not extra or found:
            return f"unanswerable but {found or 'no absent words / has keys'}"
        if not any(occurs(w, question.lower()) for w in extra):
            return "unanswerable, but none of its absent words is in the question"
        return None
    if not keys:
        return "no evidence"
    sessions = {where[k][0] for k in keys}
    if category == "multi-hop" and len(sessions) < 2:
        return "multi-hop evidence in one session"
    if category == "updated" and (not extra or max(where[k][0] for k in extra) >= min(sessions)):
        return "the updated fact is not later than the one it replaces"
    return None


def _questions(conv: Conversation, where: dict[str, tuple[int, str]], rows: list[dict]) -> list[dict]:
    """The rows of qa.jsonl for one conversation, each question checked (module docstring)."""
    text = "\n".join(r["text"] for r in rows).lower()
    out = []
    for i, (category, question, keys, extra) in enumerate(conv.questions):
        problem = _question_problem(category, question, keys, extra, where, text)
        if problem:
            raise _fail(conv.conv_id, f"{question!r}: {problem}")
        out.append(
            {
                "conv_id": conv.conv_id,
                "qa_id": f"{conv.conv_id}#{i}",
                "question": question,
                "category": CATEGORIES[category],
                "category_name": category,
                "evidence": [where[k][1] for k in keys],
            }
        )
    return out


def generate(conversations: tuple[Conversation, ...] = CONVERSATIONS) -> tuple[bytes, bytes, dict[str, int]]:
    """Both files' bytes (UTF-8, one JSON object a line, ``\\n`` endings) and counts by what they hold.

    Raises:
        SystemExit: a check failed (module docstring).
    """
    turns: list[dict] = []
    qa: list[dict] = []
    ids = [c.conv_id for c in conversations]
    if len(set(ids)) != len(ids):
        raise SystemExit("make_agent_dev_zh: repeated conversation id")
    for conv in conversations:
        rows, questions, _ = build(conv)
        turns += rows
        qa += questions
    counts = _counts(turns, qa)
    answerable = counts["questions"] - counts.get("q:unanswerable", 0)
    if len(conversations) < 10 or answerable < 150 or counts.get("q:unanswerable", 0) < 40:
        raise SystemExit(f"make_agent_dev_zh: too few conversations or questions: {counts}")
    return _dump(turns), _dump(qa), counts


def _counts(turns: list[dict], qa: list[dict]) -> dict[str, int]:
    """:func:`make_agent_dev._counts` with this set's acknowledgements and question marks."""
    return counts_of(turns, qa, ACKS, ("？", "?"))


def main(argv: list[str] | None = None) -> int:
    return cli(argv, generate, OUT, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
